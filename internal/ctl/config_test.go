package ctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestConfigPath(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"xdg", map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/flowplane/config.yaml"},
		{"home", map[string]string{"HOME": "/h"}, "/h/.config/flowplane/config.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConfigPath(func(k string) string { return tt.env[k] })
			if err != nil || got != tt.want {
				t.Fatalf("ConfigPath = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestConfigSaveLoadPermissions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "flowplane", "config.yaml")
	empty, err := LoadConfig(path)
	if err != nil || len(empty.Contexts) != 0 {
		t.Fatalf("a missing file: %+v, %v; want an empty configuration", empty, err)
	}
	var c Config
	c.Put(Context{Name: "prod", Hub: "https://hub:8090", TokenFile: "/run/secrets/op", CAFile: "/etc/hub.crt"})
	c.Put(Context{Name: "local", Hub: "http://127.0.0.1:8090", TokenEnv: "SVC_OPERATOR_TOKEN"})
	c.Put(Context{Name: "local", Hub: "http://127.0.0.1:8091", TokenEnv: "SVC_OPERATOR_TOKEN"}) // replaces
	c.Current = "local"
	if err := SaveConfig(path, c); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", p, got, want)
		}
	}
	got, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, got); diff != "" {
		t.Fatalf("round trip (-saved +loaded):\n%s", diff)
	}
	if names := got.Names(); !cmp.Equal(names, []string{"local", "prod"}) {
		t.Fatalf("names %v, want sorted [local prod]", names)
	}
	if err := got.Delete("local"); err != nil || got.Current != "" {
		t.Fatalf("delete of the current context: %v, current %q", err, got.Current)
	}
	if _, err := got.Get("local"); err == nil {
		t.Fatal("a deleted context is still there")
	}
	if err := got.Delete("ghost"); err == nil {
		t.Fatal("deleting an unknown context succeeded")
	}
}

func TestConfigUnknownFieldIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	// A token written inline is not a field of a context: it is refused,
	// not silently kept.
	if err := os.WriteFile(path, []byte("contexts:\n  - name: a\n    hub: http://h\n    token: secret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path)
	if err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("LoadConfig = %v; want an error naming the unknown field", err)
	}
	if strings.Contains(err.Error(), "secret-value") {
		t.Fatalf("the error shows the value: %v", err)
	}
}

func TestTokenOf(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OP": "from-env"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		x       Context
		want    string
		wantErr bool
	}{
		{Context{Name: "e", TokenEnv: "OP"}, "from-env", false},
		{Context{Name: "f", TokenFile: file}, "from-file", false},
		{Context{Name: "unset", TokenEnv: "NOPE"}, "", true},
		{Context{Name: "missing", TokenFile: file + ".x"}, "", true},
		{Context{Name: "none"}, "", false},
	}
	for _, tt := range tests {
		got, err := tokenOf(tt.x, getenv)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("%s: tokenOf = %q, %v; want %q, error %t", tt.x.Name, got, err, tt.want, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "from-") {
			t.Errorf("%s: the error shows a token: %v", tt.x.Name, err)
		}
	}
}
