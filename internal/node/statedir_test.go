package node

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/lockfile"
)

func TestResolveStateDir(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "node a.yaml")
	name, err := StateName(conf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(name, "node_a-") || len(name) != len("node_a-")+8 {
		t.Errorf("StateName = %q, want node_a-<8 hex digits>", name)
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	tests := []struct {
		name       string
		flag       string
		env        func(string) string
		want, from string
	}{
		{"flag wins", "/srv/state", env("SVC_STATE_ROOT", "/env", "XDG_STATE_HOME", "/xdg", "HOME", "/home/u"), "/srv/state", "flag"},
		{"SVC_STATE_ROOT", "", env("SVC_STATE_ROOT", "/env", "XDG_STATE_HOME", "/xdg", "HOME", "/home/u"), "/env", "SVC_STATE_ROOT"},
		{"XDG_STATE_HOME", "", env("XDG_STATE_HOME", "/xdg", "HOME", "/home/u"), "/xdg/flowplane/" + name, "XDG_STATE_HOME"},
		{"relative XDG_STATE_HOME is ignored", "", env("XDG_STATE_HOME", "rel", "HOME", "/home/u"), "/home/u/.local/state/flowplane/" + name, "HOME"},
		{"HOME", "", env("HOME", "/home/u"), "/home/u/.local/state/flowplane/" + name, "HOME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveStateDir(tt.flag, conf, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if got.Path != tt.want || got.Source != tt.from {
				t.Errorf("got %+v, want %s from %s", got, tt.want, tt.from)
			}
		})
	}
	if _, err := ResolveStateDir("", conf, env()); err == nil || !strings.Contains(err.Error(), "--state-dir") {
		t.Errorf("no HOME, no XDG_STATE_HOME: %v, want an error pointing at --state-dir", err)
	}

	// Another file in the same folder gets another directory; the same
	// file through a symbolic link gets the same one.
	other, _ := StateName(filepath.Join(dir, "node b.yaml"))
	if other == name {
		t.Errorf("two files share state name %s", name)
	}
	if err := os.WriteFile(conf, []byte("streams: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link.yaml")
	if err := os.Symlink(conf, link); err != nil {
		t.Fatal(err)
	}
	if viaLink, _ := StateName(link); viaLink != name {
		t.Errorf("StateName through a link = %s, want %s", viaLink, name)
	}

	// A .flowplane/ beside the file that holds a node's state is kept.
	legacy := filepath.Join(dir, LegacyStateDir)
	if err := os.MkdirAll(filepath.Join(legacy, "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := ResolveStateDir("", conf, env("HOME", "/home/u"))
	if err != nil || got.Path != legacy || got.Source != "legacy" {
		t.Errorf("with state beside the file: %+v, %v; want %s (legacy)", got, err, legacy)
	}
	if got, _ := ResolveStateDir("", conf, env("SVC_STATE_ROOT", "/env")); got.Path != "/env" {
		t.Errorf("SVC_STATE_ROOT loses to the legacy directory: %+v", got)
	}
}

func TestLockStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	l, err := LockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockStateDir(dir)
	var inUse *StateDirInUseError
	if !errors.As(err, &inUse) || !errors.Is(err, lockfile.ErrHeld) {
		t.Fatalf("second LockStateDir: %v, want a StateDirInUseError", err)
	}
	if want := "state directory " + dir + " is in use by process " + strconv.Itoa(os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("message %q does not say %q", err, want)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l, err = LockStateDir(dir)
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	l.Release()
}
