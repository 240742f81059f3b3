package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// dialTimeout bounds one connection attempt, so that Connect against a
// server that is down fails within seconds; a URL's dial_timeout wins.
const dialTimeout = 3 * time.Second

// ModeConfig is ArkFlow's connection mode: `{type: single, url}` or
// `{type: cluster, urls}`.
type ModeConfig struct {
	Type string   `json:"type"`
	URL  string   `json:"url,omitempty"`
	URLs []string `json:"urls,omitempty"`
}

func modeSchema() map[string]any {
	urls := component.Prop("array", "cluster: the URLs of some of the cluster's nodes (the rest are discovered); "+
		"user, password and TLS are taken from the first.", nil)
	urls["items"] = map[string]any{"type": "string"}
	urls["minItems"] = 1
	s := component.ObjectSchema(map[string]any{
		"type": component.EnumProp("`single` for one server, `cluster` for a Redis Cluster.", "", "single", "cluster"),
		"url": component.Prop("string", "single: the server's URL, redis://[user:password@]host:port[/db] or rediss:// "+
			"for TLS; query options of go-redis such as dial_timeout are accepted.", nil),
		"urls": urls,
	}, "type")
	s["description"] = "How to connect: `{type: single, url}` or `{type: cluster, urls}`."
	return requireWhen(s, map[string][]string{"single": {"url"}, "cluster": {"urls"}})
}

// connection is a validated mode: it makes clients on Connect.
type connection struct {
	single  *goredis.Options
	cluster *goredis.ClusterOptions
	hosts   string // for logs and errors: never the URL, which may hold a password
	// net is how servers are dialled, a cluster's announced nodes
	// included (the Hub's work: its remote policy at connect time).
	net sandbox.Net
}

// parseMode validates the mode field; errors name it but never quote a URL.
func parseMode(m ModeConfig, n sandbox.Net) (c *connection, err error) {
	defer func() {
		if c != nil {
			c.net = n
		}
	}()
	switch m.Type {
	case "single":
		if m.URL == "" {
			return nil, errors.New("mode.url: required with type single")
		}
		if len(m.URLs) > 0 {
			return nil, errors.New("mode.urls: only with type cluster")
		}
		o, err := goredis.ParseURL(m.URL)
		if err != nil {
			return nil, fmt.Errorf("mode.url: not a redis:// or rediss:// URL (%s)", scrub(err))
		}
		if o.DialTimeout == 0 {
			o.DialTimeout = dialTimeout
		}
		return &connection{single: o, hosts: o.Addr}, nil
	case "cluster":
		if len(m.URLs) == 0 {
			return nil, errors.New("mode.urls: at least one is required with type cluster")
		}
		if m.URL != "" {
			return nil, errors.New("mode.url: only with type single")
		}
		var co *goredis.ClusterOptions
		for i, u := range m.URLs {
			o, err := goredis.ParseClusterURL(u)
			if err != nil {
				return nil, fmt.Errorf("mode.urls[%d]: not a redis:// or rediss:// URL (%s)", i, scrub(err))
			}
			if co == nil {
				co = o
				continue
			}
			co.Addrs = append(co.Addrs, o.Addrs...)
		}
		if co.DialTimeout == 0 {
			co.DialTimeout = dialTimeout
		}
		return &connection{cluster: co, hosts: strings.Join(co.Addrs, ",")}, nil
	case "":
		return nil, errors.New("mode.type: required (single or cluster)")
	default:
		return nil, fmt.Errorf("mode.type: must be single or cluster, got %q", m.Type)
	}
}

// scrub keeps a URL parse error from repeating the URL, which may hold a
// password: url.Error quotes it, so only the reason after the last ": "
// is kept.
func scrub(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// client makes a new client. An input's client does not retry commands
// itself (noRetries): a command retried after its reply was lost could
// move an element or read an entry the input never sees, while a failure
// it is told about makes it look for such orphans.
func (c *connection) client(noRetries bool) goredis.UniversalClient {
	if c.single != nil {
		o := *c.single
		if noRetries {
			o.MaxRetries = -1
		}
		if c.net.Restricted() {
			o.Dialer = dialer(c.net, o.DialTimeout, o.TLSConfig)
		}
		return goredis.NewClient(&o)
	}
	o := *c.cluster
	if noRetries {
		o.MaxRetries = -1
	}
	if c.net.Restricted() {
		o.Dialer = dialer(c.net, o.DialTimeout, o.TLSConfig)
	}
	return goredis.NewClusterClient(&o)
}

// dialer dials through n, with TLS when conf is set: a client's own
// Dialer replaces the one that would have added it.
func dialer(n sandbox.Net, timeout time.Duration, conf *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dial := n.Dial(&net.Dialer{Timeout: timeout, KeepAlive: 5 * time.Minute})
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil || conf == nil {
			return c, err
		}
		cc := conf
		if cc.ServerName == "" {
			cc = conf.Clone()
			cc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(c, cc)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return tc, nil
	}
}

// ping checks that the server answers, so Connect fails fast and clearly
// when it does not.
func (c *connection) ping(ctx context.Context, cl goredis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(ctx, 2*dialTimeout)
	defer cancel()
	if err := cl.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", c.hosts, err)
	}
	return nil
}

// requireWhen adds to the object schema s, for each value of its "type"
// property, the properties that value requires (JSON Schema if/then), so
// that validation names a missing one before the constructor runs.
func requireWhen(s map[string]any, req map[string][]string) map[string]any {
	var all []any
	for _, t := range sortedKeys(req) {
		all = append(all, map[string]any{
			"if": map[string]any{
				"properties": map[string]any{"type": map[string]any{"const": t}},
				"required":   []any{"type"},
			},
			"then": map[string]any{"required": req[t]},
		})
	}
	s["allOf"] = all
	return s
}

func sortedKeys(m map[string][]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// logger is res.Logger, or one that discards for a component built
// outside the registry.
func logger(res component.Resources) *slog.Logger {
	if res.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return res.Logger
}

func init() {
	// go-redis reports connection trouble through a process-wide logger
	// that writes to stderr; send it to slog instead, as warnings. Its
	// lines name addresses, never passwords.
	goredis.SetLogger(slogPrinter{})
}

// slogPrinter is go-redis' logger, printing to slog.Default.
type slogPrinter struct{}

func (slogPrinter) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().WarnContext(ctx, "go-redis: "+strings.TrimSpace(fmt.Sprintf(format, v...)), "component", "redis")
}
