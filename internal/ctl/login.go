package ctl

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// resolved is the Hub and credentials one run uses, and where they came from.
type resolved struct {
	hub, token, caFile string
	context            string // the context's name, "" when the Hub came from a flag or the environment
}

// client returns the run's client, built on first use.
func (a *app) client() (*Client, error) {
	if a.c != nil {
		return a.c, nil
	}
	r, err := a.resolve()
	if err != nil {
		return nil, err
	}
	c, err := newClient(r.hub, r.context, r.token, r.caFile)
	if err != nil {
		return nil, err
	}
	a.c = c
	return c, nil
}

// resolve picks the Hub and token: --hub, FLOWPLANE_HUB, else the
// context's; FLOWPLANE_TOKEN, else the context's token source. A context's
// token is sent only to that context's Hub.
func (a *app) resolve() (resolved, error) {
	var r resolved
	cfg, _, err := a.loadConfig()
	if err != nil {
		return r, err
	}
	name := a.ctxFlag
	if name == "" {
		name = cfg.Current
	}
	var cx *Context
	if name != "" {
		x, err := cfg.Get(name)
		if err != nil {
			if a.ctxFlag != "" {
				return r, usagef("%v", err)
			}
		} else {
			cx = &x
		}
	}
	r.hub = a.hubFlag
	if r.hub == "" {
		r.hub = a.env.Getenv(EnvHub)
	}
	if a.ctxFlag != "" && a.hubFlag == "" {
		r.hub = "" // an explicit context wins over the environment
	}
	if r.hub == "" && cx != nil {
		r.hub, r.context = cx.Hub, cx.Name
	}
	if r.hub == "" {
		return r, usagef("no Hub: run flowplane ctl login --hub URL, or set %s", EnvHub)
	}
	if cx != nil && strings.TrimSuffix(cx.Hub, "/") == strings.TrimSuffix(r.hub, "/") {
		r.context, r.caFile = cx.Name, cx.CAFile
	}
	r.token = a.env.Getenv(EnvToken)
	if r.token == "" && r.context != "" {
		if r.token, err = tokenOf(*cx, a.env.Getenv); err != nil {
			return r, err
		}
	}
	return r, nil
}

// tokenOf reads a context's token from its source.
func tokenOf(x Context, getenv func(string) string) (string, error) {
	switch {
	case x.TokenEnv != "":
		t := getenv(x.TokenEnv)
		if t == "" {
			return "", fmt.Errorf("context %q takes its token from $%s, which is not set", x.Name, x.TokenEnv)
		}
		return t, nil
	case x.TokenFile != "":
		b, err := os.ReadFile(x.TokenFile)
		if err != nil {
			return "", fmt.Errorf("context %q: token file: %w", x.Name, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", nil
}

func (a *app) loadConfig() (Config, string, error) {
	path, err := ConfigPath(a.env.Getenv)
	if err != nil {
		return Config{}, "", err
	}
	cfg, err := LoadConfig(path)
	return cfg, path, err
}

// tokenSource is how login obtains a token. The token flows below are
// the seam for operator identity: an OIDC device or PKCE flow is one more
// source that returns a token (and a refresh token to keep in the token
// file) the same way.
type tokenSource struct {
	env  string // --token-env: kept as the context's source
	file string // --token-file: kept as the context's source
	// otherwise the token is read from stdin and kept in a token file of
	// its own, 0600
}

func (a *app) loginCommand() *cobra.Command {
	var name, caFile string
	var src tokenSource
	c := &cobra.Command{
		Use:   "login",
		Short: "Check a token against a Hub and save it as a context",
		Long: `login checks the token against the Hub (GET /api/v1/status) and saves a
context: the Hub URL and where the token comes from, made the current one.
The token comes from an environment variable (--token-env, kept as a
reference), a file (--token-file, kept as a path) or stdin (saved in a 0600
file under the configuration directory). A token is never printed.`,
		Example: `  flowplane ctl login --hub http://127.0.0.1:8090 --token-env SVC_OPERATOR_TOKEN
  flowplane ctl login --hub https://hub.example:8090 --name prod --token-file /run/secrets/op --ca-file hub.crt
  pass show flowplane/prod | flowplane ctl login --hub https://hub.example:8090 --name prod`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.login(cmd.Context(), name, caFile, src)
		},
	}
	c.Flags().StringVar(&name, "name", "default", "name of the context to save")
	c.Flags().StringVar(&src.env, "token-env", "", "environment variable holding the token")
	c.Flags().StringVar(&src.file, "token-file", "", "file holding the token")
	c.Flags().StringVar(&caFile, "ca-file", "", "PEM file of the CAs an https:// Hub is verified against")
	c.MarkFlagsMutuallyExclusive("token-env", "token-file")
	return c
}

func (a *app) login(ctx context.Context, name, caFile string, src tokenSource) error {
	hub := a.hubFlag
	if hub == "" {
		hub = a.env.Getenv(EnvHub)
	}
	if hub == "" {
		return usagef("login needs --hub URL (or %s)", EnvHub)
	}
	if !validContextName(name) {
		return usagef("context name %q: use letters, digits, '.', '_' or '-'", name)
	}
	cfg, path, err := a.loadConfig()
	if err != nil {
		return err
	}
	x := Context{Name: name, Hub: hub, CAFile: absOrEmpty(caFile)}
	var token string
	switch {
	case src.env != "":
		x.TokenEnv = src.env
		if token = a.env.Getenv(src.env); token == "" {
			return fmt.Errorf("$%s is not set", src.env)
		}
	case src.file != "":
		x.TokenFile = absOrEmpty(src.file)
		if token, err = tokenOf(x, a.env.Getenv); err != nil {
			return err
		}
	default:
		line, _ := bufio.NewReader(a.env.Stdin).ReadString('\n')
		if token = strings.TrimSpace(line); token == "" {
			return usagef("no token: give --token-env NAME, --token-file FILE or the token on stdin")
		}
		x.TokenFile = filepath.Join(filepath.Dir(path), "tokens", name)
	}
	c, err := newClient(hub, name, token, x.CAFile)
	if err != nil {
		return err
	}
	var st struct {
		Version string `json:"version"`
	}
	if err := c.get(ctx, "/status", nil, &st); err != nil {
		return err
	}
	if src.env == "" && src.file == "" {
		if err := writePrivate(x.TokenFile, []byte(token+"\n")); err != nil {
			return err
		}
	}
	cfg.Put(x)
	cfg.Current = name
	if err := SaveConfig(path, cfg); err != nil {
		return err
	}
	fmt.Fprintf(a.env.Stdout, "logged in to %s (Hub %s)%s; context %q is current\n", hub, orDash(st.Version), who(ctx, c), name)
	return nil
}

// who is " as <principal> (<roles>)" from the Hub's whoami, or "" when the
// Hub does not say (a Hub before operator identity).
func who(ctx context.Context, c *Client) string {
	var w struct {
		Principal string   `json:"principal"`
		Roles     []string `json:"roles"`
	}
	if err := c.get(ctx, "/auth/whoami", nil, &w); err != nil || w.Principal == "" {
		return ""
	}
	return fmt.Sprintf(" as %s (%s)", w.Principal, strings.Join(w.Roles, ", "))
}

func validContextName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return s != "." && s != ".."
}

func absOrEmpty(p string) string {
	if p == "" {
		return ""
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

func (a *app) contextCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "context",
		Short: "List, switch and delete saved contexts",
		Example: `  flowplane ctl context list
  flowplane ctl context use prod
  flowplane ctl context current
  flowplane ctl context delete old`,
	}
	names := func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		cfg, _, err := a.loadConfig()
		if err != nil || len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return cfg.Names(), cobra.ShellCompDirectiveNoFileComp
	}
	c.AddCommand(&cobra.Command{
		Use: "list", Short: "List the contexts", Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := a.loadConfig()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CURRENT\tNAME\tHUB\tTOKEN FROM\tCA FILE")
			for _, x := range cfg.Contexts {
				cur := ""
				if x.Name == cfg.Current {
					cur = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cur, x.Name, x.Hub, tokenSourceText(x), orDash(x.CAFile))
			}
			return tw.Flush()
		},
	}, &cobra.Command{
		Use: "use NAME", Short: "Make a context the current one", Args: exactArgs(1, "a context name"),
		ValidArgsFunction: names,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, path, err := a.loadConfig()
			if err != nil {
				return err
			}
			if _, err := cfg.Get(args[0]); err != nil {
				return err
			}
			cfg.Current = args[0]
			if err := SaveConfig(path, cfg); err != nil {
				return err
			}
			fmt.Fprintf(a.env.Stdout, "context %q is current\n", args[0])
			return nil
		},
	}, &cobra.Command{
		Use: "current", Short: "Show the Hub and context in use", Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := a.resolve()
			if err != nil {
				return err
			}
			from := "context " + r.context
			if r.context == "" {
				from = "--hub or " + EnvHub
			}
			tok := "none"
			if r.token != "" {
				tok = "set"
			}
			fmt.Fprintf(a.env.Stdout, "hub: %s\nfrom: %s\ntoken: %s\n", r.hub, from, tok)
			return nil
		},
	}, &cobra.Command{
		Use: "delete NAME", Short: "Delete a context (and the token file login wrote for it)", Args: exactArgs(1, "a context name"),
		ValidArgsFunction: names,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, path, err := a.loadConfig()
			if err != nil {
				return err
			}
			x, err := cfg.Get(args[0])
			if err != nil {
				return err
			}
			if err := cfg.Delete(args[0]); err != nil {
				return err
			}
			if err := SaveConfig(path, cfg); err != nil {
				return err
			}
			if x.TokenFile == filepath.Join(filepath.Dir(path), "tokens", x.Name) {
				_ = os.Remove(x.TokenFile)
			}
			fmt.Fprintf(a.env.Stdout, "context %q deleted\n", args[0])
			return nil
		},
	})
	return c
}

// tokenSourceText names where a context's token comes from, never the token.
func tokenSourceText(x Context) string {
	switch {
	case x.TokenEnv != "":
		return "$" + x.TokenEnv
	case x.TokenFile != "":
		return x.TokenFile
	}
	return "-"
}
