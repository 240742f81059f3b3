package systemd

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// binary is where the units expect flowplane.
const binary = "/usr/local/bin/flowplane"

// units are the unit files with the command line each must run.
var units = map[string]string{
	"flowplane-hub.service":  binary + " hub",
	"flowplane-node.service": binary + " --config /etc/flowplane/node.yaml --state-dir /var/lib/flowplane-node",
}

// hardening is what every unit must set, key and value.
var hardening = map[string]string{
	"DynamicUser":             "yes",
	"NoNewPrivileges":         "yes",
	"CapabilityBoundingSet":   "",
	"AmbientCapabilities":     "",
	"ProtectSystem":           "strict",
	"ProtectHome":             "yes",
	"PrivateTmp":              "yes",
	"PrivateDevices":          "yes",
	"ProtectKernelTunables":   "yes",
	"ProtectKernelModules":    "yes",
	"ProtectControlGroups":    "yes",
	"RestrictSUIDSGID":        "yes",
	"RestrictNamespaces":      "yes",
	"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
	"StateDirectoryMode":      "0700",
	"UMask":                   "0077",
	"SystemCallErrorNumber":   "EPERM",
}

// settings reads the [Service] settings of a unit file (the last value of
// a key given twice).
func settings(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: not a setting: %q", path, line)
			}
			out[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUnitsHardened: each unit runs its command as a dynamic user with its
// own state directory and every hardening setting of the table.
func TestUnitsHardened(t *testing.T) {
	for name, cmd := range units {
		t.Run(name, func(t *testing.T) {
			s := settings(t, name)
			if s["ExecStart"] != cmd {
				t.Errorf("ExecStart=%q, want %q", s["ExecStart"], cmd)
			}
			if s["StateDirectory"] == "" {
				t.Error("no StateDirectory")
			}
			for k, want := range hardening {
				if got, ok := s[k]; !ok || got != want {
					t.Errorf("%s=%q (set: %v), want %q", k, got, ok, want)
				}
			}
		})
	}
}

var exposure = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)

// TestUnitsVerify runs systemd-analyze verify on each unit (with the
// flowplane binary's path pointing at an executable that exists here, as
// verify requires) and its offline security analysis, whose exposure
// level must stay below 2.0 ("OK" is below 4.0; a default service is
// 9.6).
func TestUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze is needed (Debian package systemd; .ci/run installs it): %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name := range units {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(string(b), binary, self)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name := range units {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if out, err := exec.Command(analyze, "verify", path).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
				t.Errorf("systemd-analyze verify: %v\n%s", err, out)
			}
			out, err := exec.Command(analyze, "security", "--offline=yes", path).CombinedOutput()
			m := exposure.FindSubmatch(out)
			if m == nil {
				t.Fatalf("systemd-analyze security: %v\n%s", err, out)
			}
			level, _ := strconv.ParseFloat(string(m[1]), 64)
			t.Logf("%s: exposure %.1f", name, level)
			if level >= 2.0 {
				t.Errorf("exposure level %.1f, want below 2.0\n%s", level, out)
			}
		})
	}
}
