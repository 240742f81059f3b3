package telemetry_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/telemetry"
)

func TestNewLogger(t *testing.T) {
	var out bytes.Buffer
	log, closer, err := telemetry.NewLogger(config.Logging{Level: "warn", Format: "json"}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	log.Info("hidden")
	log.Warn("shown", "k", "v")
	if got := out.String(); strings.Contains(got, "hidden") || !strings.Contains(got, `"msg":"shown"`) || !strings.Contains(got, `"k":"v"`) {
		t.Errorf("json log at warn = %q", got)
	}

	out.Reset()
	log, _, err = telemetry.NewLogger(config.Logging{Level: "debug", Format: "plain"}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("dbg")
	if !strings.Contains(out.String(), "level=DEBUG msg=dbg") {
		t.Errorf("plain log = %q", out.String())
	}
}

func TestLoggerFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	if err := os.WriteFile(path, []byte("earlier\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log, closer, err := telemetry.NewLogger(config.Logging{Level: "info", Format: "plain", FilePath: path}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("appended")
	closer.Close()
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), "earlier\n") || !strings.Contains(string(b), "msg=appended") {
		t.Errorf("log file = %q", b)
	}
	_, _, err = telemetry.NewLogger(config.Logging{Level: "info", FilePath: filepath.Join(path, "sub", "x.log")}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "logging.file_path: cannot open the log file") {
		t.Errorf("unopenable file: err = %v", err)
	}
}

func TestRegistryGathers(t *testing.T) {
	mfs, err := telemetry.NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	if !names["go_goroutines"] || !names["process_resident_memory_bytes"] {
		t.Errorf("registry lacks runtime/process metrics: %v", names)
	}
}

// TestLoggerRedacts: a value added to the redactor, even after the logger
// was built, is scrubbed from messages, string, error, grouped and other
// attributes, in both formats, however the format escapes it, also when it
// was quoted before it was logged.
func TestLoggerRedacts(t *testing.T) {
	// Each secret holds "K3y", which no escaping changes: finding it in the
	// output means a form of the secret escaped redaction.
	for _, secret := range []string{"s3cr3t-K3y", "quote\"K3y\\back", "new\nK3y\ttab", "ünïK3ycødé-ß€", "<html&K3y>"} {
		for _, format := range []string{"plain", "json"} {
			var out bytes.Buffer
			secrets := config.NewRedactor()
			log, _, err := telemetry.NewLogger(config.Logging{Level: "info", Format: format}, &out, secrets)
			if err != nil {
				t.Fatal(err)
			}
			secrets.Add(secret)
			log.With("with", "w-"+secret).Info("open /nonexistent-"+secret+".txt", "path", "/data/"+secret,
				"err", errors.New("mkdir /proc/"+secret+": denied"), "quoted", fmt.Errorf("open %q: denied", "/x/"+secret),
				"any", []string{secret}, slog.Group("g", "k", "x"+secret+"y"))
			got := out.String()
			if strings.Contains(got, "K3y") {
				t.Errorf("%s log holds the secret %q: %s", format, secret, got)
			}
			if n := strings.Count(got, config.Redacted); n != 7 {
				t.Errorf("%s log: %d redactions, want 7: %s", format, n, got)
			}
		}
	}
}
