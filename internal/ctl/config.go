package ctl

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Config is the client's configuration file: named contexts and the
// current one. It holds where tokens come from, never a token.
type Config struct {
	Current  string    `yaml:"current_context,omitempty"`
	Contexts []Context `yaml:"contexts"`
}

// Context is one Hub the client talks to.
type Context struct {
	Name string `yaml:"name"`
	// Hub is the Hub's base URL (http://127.0.0.1:8090); the API prefix
	// /api/v1 is added unless the URL has a path.
	Hub string `yaml:"hub"`
	// TokenEnv names the environment variable holding the token.
	TokenEnv string `yaml:"token_env,omitempty"`
	// TokenFile is a file holding the token (trailing newlines dropped).
	TokenFile string `yaml:"token_file,omitempty"`
	// CAFile is a PEM file of the CAs an https:// Hub is verified against.
	CAFile string `yaml:"ca_file,omitempty"`
}

// ErrNoContext is returned for a context name the configuration lacks.
var ErrNoContext = errors.New("no such context")

// ConfigPath is where the configuration lives:
// $XDG_CONFIG_HOME/flowplane/config.yaml, else ~/.config/flowplane/config.yaml.
func ConfigPath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "flowplane", "config.yaml"), nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("no configuration directory: set XDG_CONFIG_HOME or HOME")
		}
	}
	return filepath.Join(home, ".config", "flowplane", "config.yaml"), nil
}

// LoadConfig reads the configuration at path; a missing file is an empty
// configuration.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// SaveConfig writes c to path atomically, the file 0600 in a 0700
// directory (made so when it is created).
func SaveConfig(path string, c Config) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	return writePrivate(path, b)
}

// writePrivate writes b to path through a temporary file and a rename, the
// file 0600, its directory created 0700.
func writePrivate(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Get returns the named context.
func (c Config) Get(name string) (Context, error) {
	for _, x := range c.Contexts {
		if x.Name == name {
			return x, nil
		}
	}
	return Context{}, fmt.Errorf("%w %q (flowplane ctl context list shows them)", ErrNoContext, name)
}

// Put adds or replaces a context by name.
func (c *Config) Put(x Context) {
	for i := range c.Contexts {
		if c.Contexts[i].Name == x.Name {
			c.Contexts[i] = x
			return
		}
	}
	c.Contexts = append(c.Contexts, x)
	slices.SortFunc(c.Contexts, func(a, b Context) int { return strings.Compare(a.Name, b.Name) })
}

// Delete removes a context; the current context, deleted, is unset.
func (c *Config) Delete(name string) error {
	i := slices.IndexFunc(c.Contexts, func(x Context) bool { return x.Name == name })
	if i < 0 {
		return fmt.Errorf("%w %q", ErrNoContext, name)
	}
	c.Contexts = slices.Delete(c.Contexts, i, i+1)
	if c.Current == name {
		c.Current = ""
	}
	return nil
}

// Names lists the contexts' names.
func (c Config) Names() []string {
	out := make([]string, 0, len(c.Contexts))
	for _, x := range c.Contexts {
		out = append(out, x.Name)
	}
	return out
}
