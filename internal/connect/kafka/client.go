package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// defaultConnectTimeout bounds Connect when no connect_timeout is set: a
// broker that is down fails Connect within it, and the stream retries.
const defaultConnectTimeout = "5s"

// clientConfig holds the fields the input and the output share.
type clientConfig struct {
	Brokers        []string `json:"brokers"`
	ClientID       string   `json:"client_id"`
	ConnectTimeout string   `json:"connect_timeout"`
}

// sharedProps are the schema properties of clientConfig.
func sharedProps(props map[string]any) map[string]any {
	brokers := component.Prop("array", "Broker addresses (host:port), e.g. [\"localhost:9092\"].", nil)
	brokers["items"] = map[string]any{"type": "string", "minLength": 1}
	brokers["minItems"] = 1
	props["brokers"] = brokers
	props["client_id"] = component.Prop("string", "Client id the brokers see in logs and quotas.", nil)
	props["connect_timeout"] = component.DurationProp("How long Connect waits for a broker to answer before it fails (and the stream retries).", defaultConnectTimeout)
	return props
}

// validate checks the shared fields and returns the parsed connect timeout.
func (c *clientConfig) validate() (time.Duration, []error) {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("brokers: at least one is required"))
	}
	for i, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			errs = append(errs, fmt.Errorf("brokers[%d]: %q is not host:port", i, b))
		}
	}
	if c.ConnectTimeout == "" {
		c.ConnectTimeout = defaultConnectTimeout
	}
	d, err := time.ParseDuration(c.ConnectTimeout)
	if err != nil || d <= 0 {
		errs = append(errs, fmt.Errorf("connect_timeout: %q is not a positive duration such as \"5s\"", c.ConnectTimeout))
	}
	return d, errs
}

// opts are the client options every client of a component starts with.
// Through a restricted network (Hub-delivered work), every connection
// to a broker, including those to brokers the cluster's metadata names,
// is decided at connect time.
func (c *clientConfig) opts(log *slog.Logger, dial time.Duration, n sandbox.Net) []kgo.Opt {
	o := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.DialTimeout(dial),
		kgo.WithLogger(slogger{log}),
	}
	if n.Restricted() {
		o = append(o, kgo.Dialer(n.Dial(&net.Dialer{Timeout: dial})))
	}
	if c.ClientID != "" {
		o = append(o, kgo.ClientID(c.ClientID))
	}
	return o
}

// ping checks that a broker answers within timeout.
func ping(ctx context.Context, cl *kgo.Client, brokers []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		return fmt.Errorf("no broker of %s answered within %s: %w", strings.Join(brokers, ","), timeout, err)
	}
	return nil
}

// slogger adapts a *slog.Logger to kgo's logger. kgo logs at warn and
// above only: its info level reports every connection.
type slogger struct{ l *slog.Logger }

func (s slogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (s slogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	s.l.Log(context.Background(), lv, "kafka client: "+msg, keyvals...)
}
