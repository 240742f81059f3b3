package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// ClientConfig holds the connection fields the input and the output share,
// named as in ArkFlow.
type ClientConfig struct {
	Host         string `json:"host"`
	Port         int    `json:"port"`
	ClientID     string `json:"client_id"`
	Username     string `json:"username"`
	Password     string `json:"password"`
	QoS          int    `json:"qos"`
	CleanSession *bool  `json:"clean_session"`
	KeepAlive    int    `json:"keep_alive"`
	// SessionExpiry is how long, in seconds, the broker keeps the session
	// (subscriptions and undelivered QoS 1/2 messages) after a disconnect
	// when clean_session is false.
	SessionExpiry int `json:"session_expiry_interval"`
	// ConnectTimeoutMs bounds one connection attempt (TCP dial and CONNACK)
	// and how long Connect and Write wait for a connection.
	ConnectTimeoutMs int `json:"connect_timeout_ms"`
}

// clientProps are the schema properties of ClientConfig.
func clientProps(cleanDefault bool) map[string]any {
	port := component.Prop("integer", "MQTT broker port.", nil)
	port["minimum"], port["maximum"] = 1, 65535
	qos := component.Prop("integer", "Quality of service: 0 (at most once), 1 (at least once) or 2 (exactly once between client and broker).", 1)
	qos["enum"] = []any{0, 1, 2}
	keep := component.Prop("integer", "Keep-alive interval in seconds (0 disables it).", 60)
	keep["minimum"], keep["maximum"] = 0, 65535
	expiry := component.Prop("integer", "Seconds the broker keeps the session after a disconnect when clean_session is false.", 3600)
	expiry["minimum"], expiry["maximum"] = 1, 4294967295
	timeout := component.Prop("integer", "Timeout of one connection attempt, in milliseconds; Connect fails after it when the broker is unreachable.", 5000)
	timeout["minimum"] = 1
	return map[string]any{
		"host":                    component.Prop("string", "MQTT broker host name or address.", nil),
		"port":                    port,
		"client_id":               component.Prop("string", "Client identifier; a persistent session is bound to it, so it must be unique among the broker's clients.", nil),
		"username":                component.Prop("string", "Username for authentication.", nil),
		"password":                component.Prop("string", "Password for authentication (may be a secret reference; never logged).", nil),
		"qos":                     qos,
		"clean_session":           component.Prop("boolean", "Start with a fresh session and drop it on disconnect (MQTT 5 clean start with session expiry 0). With false the broker keeps subscriptions and QoS 1/2 messages for session_expiry_interval seconds while the client is away.", cleanDefault),
		"keep_alive":              keep,
		"session_expiry_interval": expiry,
		"connect_timeout_ms":      timeout,
	}
}

// defaults fills in unset fields.
func (c *ClientConfig) defaults(cleanDefault bool) {
	if c.CleanSession == nil {
		c.CleanSession = &cleanDefault
	}
}

// newClientConfig returns a configuration holding the defaults of the
// fields that the zero value does not express.
func newClientConfig() ClientConfig {
	return ClientConfig{QoS: 1, KeepAlive: 60, SessionExpiry: 3600, ConnectTimeoutMs: 5000}
}

// validate returns every problem with the shared fields, each naming its field.
func (c *ClientConfig) validate() []error {
	var errs []error
	if strings.TrimSpace(c.Host) == "" {
		errs = append(errs, errors.New("host: required"))
	} else if strings.ContainsAny(c.Host, "/@?# ") {
		errs = append(errs, fmt.Errorf("host: %q is not a host name or address (give the port in port)", c.Host))
	}
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("port: must be in [1, 65535], got %d", c.Port))
	}
	if c.ClientID == "" {
		errs = append(errs, errors.New("client_id: required"))
	} else if len(c.ClientID) > 65535 || !utf8.ValidString(c.ClientID) {
		errs = append(errs, errors.New("client_id: must be valid UTF-8 of at most 65535 bytes"))
	}
	if c.QoS < 0 || c.QoS > 2 {
		errs = append(errs, fmt.Errorf("qos: must be 0, 1 or 2, got %d", c.QoS))
	}
	if c.KeepAlive < 0 || c.KeepAlive > 65535 {
		errs = append(errs, fmt.Errorf("keep_alive: must be in [0, 65535] seconds, got %d", c.KeepAlive))
	}
	if c.SessionExpiry < 1 || int64(c.SessionExpiry) > 4294967295 {
		errs = append(errs, fmt.Errorf("session_expiry_interval: must be in [1, 4294967295] seconds, got %d", c.SessionExpiry))
	}
	if c.ConnectTimeoutMs < 1 {
		errs = append(errs, fmt.Errorf("connect_timeout_ms: must be at least 1, got %d", c.ConnectTimeoutMs))
	}
	if c.Password != "" && c.Username == "" {
		errs = append(errs, errors.New("password: needs a username"))
	}
	return errs
}

func (c *ClientConfig) addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

func (c *ClientConfig) connectTimeout() time.Duration {
	return time.Duration(c.ConnectTimeoutMs) * time.Millisecond
}

// reconnectBackoff tries at once, then after 250ms, 500ms, ... capped at 5s.
func reconnectBackoff(attempt int) time.Duration {
	if attempt == 0 {
		return 0
	}
	return min(250*time.Millisecond<<min(attempt-1, 5), 5*time.Second)
}

// dialer is what dial needs besides the configuration.
type dialer struct {
	role string // "mqtt input" or "mqtt output", for errors and logs
	log  *slog.Logger
	net  sandbox.Net // how the broker is dialled (the Hub's work: its remote policy)
	// onUp is called (it must not block) on every connection, the first
	// included; onPublish receives incoming messages (nil for an output).
	onUp      func(*autopaho.ConnectionManager, *paho.Connack)
	onPublish func(paho.PublishReceived) (bool, error)
	// onDown, when set, is called (it must not block) as soon as a
	// connection is known to be lost, possibly more than once.
	onDown    func()
	manualAck bool
	// session, when set, is the session state of every connection (nil:
	// autopaho's in-memory one).
	session session.SessionManager
}

// dial starts a connection manager that reconnects by itself and waits for
// its first connection. It fails once one attempt failed, or when the
// connect timeout or ctx ends first; the manager is then stopped, so dial
// may be called again.
func (c *ClientConfig) dial(ctx context.Context, d dialer) (*autopaho.ConnectionManager, error) {
	u := &url.URL{Scheme: "mqtt", Host: c.addr()}
	firstErr := make(chan error, 1)
	down := func() {
		if d.onDown != nil {
			d.onDown()
		}
	}
	var expiry uint32
	if !*c.CleanSession {
		expiry = uint32(c.SessionExpiry)
	}
	cfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{u},
		KeepAlive:                     uint16(c.KeepAlive),
		CleanStartOnInitialConnection: *c.CleanSession,
		SessionExpiryInterval:         expiry,
		ConnectTimeout:                c.connectTimeout(),
		ReconnectBackoff:              reconnectBackoff,
		OnConnectionUp:                d.onUp,
		OnConnectionDown:              func() bool { down(); return true },
		// paho sends Request Problem Information 0 whenever the CONNECT has
		// properties; some brokers (mochi) then leave user properties out
		// of the messages they deliver too. Ask for them.
		ConnectPacketBuilder: func(cp *paho.Connect, _ *url.URL) (*paho.Connect, error) {
			if cp.Properties == nil {
				cp.Properties = &paho.ConnectProperties{}
			}
			cp.Properties.RequestProblemInfo = true
			return cp, nil
		},
		OnConnectError: func(err error) {
			select {
			case firstErr <- err:
			default:
				d.log.Warn(d.role+": reconnect failed", "broker", c.addr(), "error", err)
			}
		},
		ClientConfig: paho.ClientConfig{
			Session:                    d.session,
			ClientID:                   c.ClientID,
			EnableManualAcknowledgment: d.manualAck,
			SendAcksInterval:           ackInterval,
			OnClientError: func(err error) {
				down()
				d.log.Warn(d.role+": connection lost", "broker", c.addr(), "error", err)
			},
			OnServerDisconnect: func(dis *paho.Disconnect) {
				down()
				d.log.Warn(d.role+": broker disconnected", "broker", c.addr(), "reason_code", dis.ReasonCode)
			},
		},
	}
	if d.net.Restricted() {
		dial := d.net.Dial(&net.Dialer{Timeout: c.connectTimeout()})
		cfg.AttemptConnection = func(ctx context.Context, _ autopaho.ClientConfig, u *url.URL) (net.Conn, error) {
			return dial(ctx, "tcp", u.Host)
		}
	}
	if d.onPublish != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){d.onPublish}
	}
	if c.Username != "" {
		cfg.ConnectUsername = c.Username
		cfg.ConnectPassword = []byte(c.Password)
	}
	// The manager outlives ctx (it reconnects until Close), so it gets its own.
	cm, err := autopaho.NewConnection(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.role, err)
	}
	wait, cancel := context.WithTimeout(ctx, c.connectTimeout()+time.Second)
	defer cancel()
	up := make(chan error, 1)
	go func() { up <- cm.AwaitConnection(wait) }()
	select {
	case err = <-up:
	case err = <-firstErr:
	}
	if err != nil {
		stop, cancelStop := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancelStop()
		_ = cm.Disconnect(stop)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no connection within %s", c.connectTimeout())
		}
		return nil, fmt.Errorf("%s: connect to %s: %w", d.role, c.addr(), err)
	}
	// Later failed attempts go to the log.
	select {
	case firstErr <- errors.New("connected"):
	default:
	}
	return cm, nil
}

// ackInterval is how often paho sends the acknowledgements released by
// AckFuncs (in the order the messages arrived, as MQTT requires).
const ackInterval = 10 * time.Millisecond

// Schema patterns matching what validTopicFilter and validTopicName
// accept (besides the length and encoding checks).
const (
	topicFilterPattern = `^(#|(\+|[^+#/]*)(/(\+|[^+#/]*))*(/#)?)$`
	topicNamePattern   = `^[^+#]*$`
)

// validTopicFilter checks a subscription filter: non-empty UTF-8 without
// NUL, '#' only as the whole last level, '+' only as a whole level.
func validTopicFilter(f string) error {
	if err := validTopicString(f); err != nil {
		return err
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return errors.New("'#' must be the whole last level")
		}
		if strings.Contains(l, "+") && l != "+" {
			return errors.New("'+' must be a whole level")
		}
	}
	return nil
}

// validTopicName checks a topic to publish to: a filter without wildcards.
func validTopicName(t string) error {
	if err := validTopicString(t); err != nil {
		return err
	}
	if strings.ContainsAny(t, "+#") {
		return errors.New("a topic to publish to must not hold the wildcards + or #")
	}
	return nil
}

func validTopicString(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case len(s) > 65535:
		return errors.New("longer than 65535 bytes")
	case !utf8.ValidString(s):
		return errors.New("not valid UTF-8")
	case strings.ContainsRune(s, 0):
		return errors.New("holds a NUL character")
	}
	return nil
}
