package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// Modes of the input and output, in ArkFlow's spelling; "jetstream" is
// accepted as well.
const (
	modeRegular   = "regular"
	modeJetStream = "jet_stream"
)

// ErrNotConnected is returned by Read and Write while the client is
// reconnecting: the runtime retries with backoff and the client reconnects
// by itself.
var ErrNotConnected = errors.New("nats: not connected to the server (reconnecting)")

// AuthConfig is ArkFlow's auth object. A token takes precedence over a
// username and password.
type AuthConfig struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Token    string `json:"token"`
}

// ConnConfig holds the fields the input and output share.
type ConnConfig struct {
	URL            string      `json:"url"`
	Auth           *AuthConfig `json:"auth"`
	ConnectTimeout string      `json:"connect_timeout"`
	ReconnectWait  string      `json:"reconnect_wait"`
}

func defaultConnConfig() ConnConfig {
	return ConnConfig{ConnectTimeout: "2s", ReconnectWait: "500ms"}
}

// conn is a parsed ConnConfig.
type conn struct {
	servers        string // comma-separated, as nats.Connect takes them
	redacted       string // servers without credentials, for logs and errors
	auth           AuthConfig
	connectTimeout time.Duration
	reconnectWait  time.Duration
	// net is how servers are dialled, those the cluster announces
	// included (the Hub's work: its remote policy at connect time).
	net sandbox.Net
}

// connProps are the schema properties of ConnConfig.
func connProps(props map[string]any) map[string]any {
	props["url"] = component.Prop("string", "NATS server URL, e.g. `nats://127.0.0.1:4222`; several servers "+
		"separated by commas. Credentials in the URL are accepted and never logged.", nil)
	props["auth"] = component.ObjectSchema(map[string]any{
		"username": component.Prop("string", "Username (with `password`).", nil),
		"password": component.Prop("string", "Password (with `username`); never logged.", nil),
		"token":    component.Prop("string", "Token; takes precedence over username/password. Never logged.", nil),
	})
	props["auth"].(map[string]any)["description"] = "Authentication: username/password or a token."
	props["connect_timeout"] = component.DurationProp("Dial timeout of Connect; a server that is down fails "+
		"Connect within it and the runtime retries.", "2s")
	props["reconnect_wait"] = component.DurationProp("Pause between reconnection attempts after the "+
		"connection was lost (the client reconnects forever).", "500ms")
	return props
}

func parseConn(c ConnConfig) (conn, []error) {
	var errs []error
	out := conn{}
	var servers, redacted []string
	for s := range strings.SplitSeq(c.URL, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		r, err := redactURL(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		servers = append(servers, s)
		redacted = append(redacted, r)
	}
	if len(servers) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("url: required, e.g. nats://127.0.0.1:4222"))
	}
	out.servers, out.redacted = strings.Join(servers, ","), strings.Join(redacted, ",")
	if c.Auth != nil {
		out.auth = *c.Auth
		if out.auth.Token == "" && (out.auth.Username == "") != (out.auth.Password == "") {
			errs = append(errs, errors.New("auth: username and password go together"))
		}
	}
	var err error
	if out.connectTimeout, err = parsePositive("connect_timeout", c.ConnectTimeout); err != nil {
		errs = append(errs, err)
	}
	if out.reconnectWait, err = parsePositive("reconnect_wait", c.ReconnectWait); err != nil {
		errs = append(errs, err)
	}
	return out, errs
}

// redactURL checks one server URL and returns it without credentials. The
// URL itself is never quoted back: it may hold a password.
func redactURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", errors.New("url: each server must be a URL such as nats://host:4222")
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
	default:
		return "", fmt.Errorf("url: scheme %q is not nats, tls, ws or wss", u.Scheme)
	}
	return u.Scheme + "://" + u.Host, nil
}

func parsePositive(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: must be a positive duration such as 2s, got %q", field, s)
	}
	return d, nil
}

// normMode maps the accepted spellings of mode.type to ArkFlow's.
func normMode(t string) (string, error) {
	switch t {
	case modeRegular:
		return modeRegular, nil
	case modeJetStream, "jetstream":
		return modeJetStream, nil
	default:
		return "", fmt.Errorf("mode.type: must be regular or jet_stream, got %q", t)
	}
}

// dial connects once, failing within connectTimeout when no server
// answers. After that the client reconnects forever by itself; down is
// signalled (non-blocking, buffered 1) whenever the connection drops.
func (c *conn) dial(ctx context.Context, log *slog.Logger, name string, down chan<- struct{}) (*natsgo.Conn, error) {
	opts := []natsgo.Option{
		natsgo.Name(name),
		natsgo.Timeout(c.connectTimeout),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(c.reconnectWait),
		natsgo.ReconnectJitter(c.reconnectWait/5, c.reconnectWait/5),
		// No reconnect buffer: a publish while disconnected fails at once,
		// so Write (and a JetStream pull request) reports the outage
		// instead of pretending to succeed.
		natsgo.ReconnectBufSize(-1),
		natsgo.DisconnectErrHandler(func(nc *natsgo.Conn, err error) {
			if err == nil && nc.IsClosed() {
				return // our own Close, not an outage
			}
			log.Warn("nats disconnected", "servers", c.redacted, "error", err)
			select {
			case down <- struct{}{}:
			default:
			}
		}),
		natsgo.ReconnectHandler(func(nc *natsgo.Conn) {
			log.Info("nats reconnected", "server", redactOrEmpty(nc.ConnectedUrlRedacted()))
		}),
		natsgo.ErrorHandler(func(_ *natsgo.Conn, sub *natsgo.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("nats async error", "subject", subj, "error", err)
		}),
	}
	if c.net.Restricted() {
		opts = append(opts, natsgo.SetCustomDialer(c.net.Dial(&net.Dialer{Timeout: c.connectTimeout})))
	}
	switch {
	case c.auth.Token != "":
		opts = append(opts, natsgo.Token(c.auth.Token))
	case c.auth.Username != "":
		opts = append(opts, natsgo.UserInfo(c.auth.Username, c.auth.Password))
	}
	type result struct {
		nc  *natsgo.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		nc, err := natsgo.Connect(c.servers, opts...)
		ch <- result{nc, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("nats: connect to %s: %w", c.redacted, r.err)
		}
		return r.nc, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func redactOrEmpty(s string) string {
	if r, err := redactURL(s); err == nil {
		return r
	}
	return ""
}

// drain empties a buffered(1) signal channel.
func drain(c chan struct{}) {
	select {
	case <-c:
	default:
	}
}
