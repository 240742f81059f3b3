package daemon

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/config"
	_ "github.com/flowplane/flowplane/internal/connect/all"
	"github.com/flowplane/flowplane/internal/node/history"
	"github.com/flowplane/flowplane/internal/policy"
)

// TestBootVersion: at start-up, a Hub version whose ${secret:} references
// this node cannot resolve gives way to the latest file version (marked
// applied, the Hub version named, no value); one whose secrets resolve
// runs; any other problem still fails.
func TestBootVersion(t *testing.T) {
	const (
		secretVar   = "SVC_SECRET_BOOT_TEST_TOKEN"
		secretValue = "boot-Test-Secret-5b7a-value"
	)
	stream := func(context string) string {
		return "logging: {level: error}\nhealth_check: {enabled: false}\nstreams:\n" +
			"  - id: a\n    input: {type: generate, context: '" + context + "', interval: 1s, batch_size: 1}\n" +
			"    pipeline: {processors: []}\n    output: {type: drop}\n"
	}
	// The file's health_check names a node id the Hub texts do not have:
	// a Hub version runs with it.
	fileText := strings.Replace(stream("file"), "health_check: {enabled: false}", "health_check: {enabled: false, node_id: boot-file}", 1)
	tests := []struct {
		name      string
		hubText   string
		env       bool // the node's environment holds the secret
		wantRun   string
		wantFall  bool
		wantOK    bool
		wantError string
	}{
		{"hub secret gone", stream("${secret:BOOT_TEST_TOKEN}"), false, "v1", true, true, ""},
		{"hub secret in the environment", stream("${secret:BOOT_TEST_TOKEN}"), true, "v3", false, true, ""},
		{"hub without secrets", stream("plain"), false, "v3", false, true, ""},
		{"hub secret with a default", stream("${secret:BOOT_TEST_TOKEN:-dflt}"), false, "v3", false, true, ""},
		{"hub env reference unset", stream("${env:BOOT_TEST_UNSET_VAR}"), false, "v3", false, false, "BOOT_TEST_UNSET_VAR"},
		// The node's policy (changed since the version came) refuses it.
		{"hub env reference refused", stream("${env:BOOT_TEST_OTHER_VAR}"), false, "v1", true, true, ""},
		{"config control off", stream("plain"), false, "v1", true, true, ""},
	}
	// The policy lets BOOT_TEST_UNSET_VAR resolve: the version then fails
	// as it would have before there was a policy.
	rp := config.Default().RemotePolicy
	rp.Env = []string{"BOOT_TEST_UNSET_VAR"}
	pol := policy.New(rp, t.TempDir())
	rp.ConfigControl = false
	off := policy.New(rp, t.TempDir())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env {
				t.Setenv(secretVar, secretValue)
			}
			hist, err := history.Open(filepath.Join(t.TempDir(), "config"), time.Now)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := hist.Boot([]byte(fileText), config.YAML, "node.yaml"); err != nil {
				t.Fatal(err)
			}
			// An API version after the file: the fallback is the file's.
			if _, err := hist.Append([]byte(stream("api")), config.YAML, history.SourceAPI, history.Meta{}); err != nil {
				t.Fatal(err)
			}
			hv, err := hist.Append([]byte(tt.hubText), config.YAML, history.SourceHub, history.Meta{HubVersion: "v9"})
			if err != nil {
				t.Fatal(err)
			}
			if err := hist.MarkApplied(hv.ID); err != nil {
				t.Fatal(err)
			}
			applied, err := hist.Applied()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			p := pol
			if tt.name == "config control off" {
				p = off
			}
			run, cfg, fallback, ok := bootVersion(hist, applied, history.Version{Content: []byte(fileText), Format: config.YAML}, p, &stderr)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v; stderr:\n%s", ok, tt.wantOK, stderr.String())
			}
			if !ok {
				if !strings.Contains(stderr.String(), tt.wantError) {
					t.Errorf("stderr %q, want it to name %q", stderr.String(), tt.wantError)
				}
				if hist.AppliedID() != hv.ID {
					t.Errorf("a failed start-up changed the applied version to %s", hist.AppliedID())
				}
				return
			}
			if run.ID != tt.wantRun || cfg == nil || len(cfg.Streams) != 1 {
				t.Errorf("runs %s (config %v), want %s", run.ID, cfg != nil, tt.wantRun)
			}
			if cfg != nil && cfg.HealthCheck.NodeID != "boot-file" {
				t.Errorf("runs with health_check %+v, want the file's", cfg.HealthCheck)
			}
			if got := hist.AppliedID(); got != tt.wantRun {
				t.Errorf("applied version %s, want %s", got, tt.wantRun)
			}
			if (fallback != nil) != tt.wantFall {
				t.Fatalf("fallback %+v, want %v", fallback, tt.wantFall)
			}
			if fallback != nil && (fallback.ID != hv.ID || fallback.HubVersion != "v9" || fallback.Content != nil) {
				t.Errorf("fallback %+v, want %s (hub v9) without its text", fallback, hv.ID)
			}
			if strings.Contains(stderr.String(), secretValue) {
				t.Errorf("stderr holds the secret value")
			}
		})
	}
}
