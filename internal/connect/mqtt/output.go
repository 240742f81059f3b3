package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/connect/strexpr"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

func init() {
	props := clientProps(true)
	props["topic"] = topicSchema()
	props["retain"] = component.Prop("boolean", "Ask the broker to retain the last message of each topic for new subscribers.", false)
	component.Default.RegisterOutput(component.Spec{
		Name: "mqtt",
		Summary: "Publishes each message to an MQTT topic (MQTT 5, QoS 0/1/2), the topic a constant or an expression " +
			"per message. Write succeeds only when the broker acknowledged every message of the batch (PUBACK for " +
			"QoS 1, PUBCOMP for QoS 2); otherwise the batch is retried, so a message may be published twice " +
			"(at-least-once; QoS 2 removes duplicates only within one publish).",
		Schema: component.ObjectSchema(props, "host", "port", "client_id", "topic"),
		Example: `type: mqtt
host: 127.0.0.1
port: 1883
client_id: flowplane-alerts
topic:
  type: expr
  expr: '"alerts/" + this.device'
qos: 1
retain: false
keep_alive: 60
`,
	}, NewOutput)
}

var _ component.Output = (*Output)(nil)

// OutputConfig is the configuration of the mqtt output.
type OutputConfig struct {
	ClientConfig
	Topic  any  `json:"topic"`
	Retain bool `json:"retain"`
}

// topicSchema is strexpr's schema with the constant forms restricted to
// topic names without wildcards, so --validate reports them.
func topicSchema() map[string]any {
	s := strexpr.Schema("Topic to publish each message to (no wildcards).")
	for _, alt := range s["oneOf"].([]any) {
		m := alt.(map[string]any)
		if m["type"] == "string" {
			m["pattern"] = topicNamePattern
			m["minLength"] = 1
		} else if v, ok := m["properties"].(map[string]any)["value"].(map[string]any); ok {
			v["pattern"] = topicNamePattern
			v["minLength"] = 1
		}
	}
	return s
}

// ErrRejected is a publish the broker answered with a failure reason code
// (for example not authorized, or a topic it does not accept).
var ErrRejected = errors.New("mqtt output: the broker rejected the message")

// Output publishes messages to MQTT topics.
type Output struct {
	conf  OutputConfig
	topic *strexpr.Expr
	log   *slog.Logger
	net   sandbox.Net // the broker is dialled through it

	mu sync.Mutex // guards cm, lost
	cm *autopaho.ConnectionManager
	// lost is closed when the current connection is lost (nil before the
	// first one): a publish waiting for its acknowledgement then fails at
	// once instead of after paho's 10s packet timeout.
	lost chan struct{}
}

// NewOutput builds an mqtt output from its configuration.
func NewOutput(conf map[string]any, res component.Resources) (component.Output, error) {
	c := OutputConfig{ClientConfig: newClientConfig()}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	c.defaults(true)
	errs := c.validate()
	topic, err := strexpr.Parse("topic", c.Topic)
	if err != nil {
		errs = append(errs, err)
	} else if s, ok := topic.Static(); ok {
		if err := validTopicName(s); err != nil {
			errs = append(errs, fmt.Errorf("topic: %q: %w", s, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Output{conf: c, topic: topic, log: res.Logger, net: res.Net}, nil
}

// Connect connects to the broker. It fails within connect_timeout_ms when
// the broker is unreachable and may be called again after a failure. Once
// connected, the client reconnects by itself.
func (o *Output) Connect(ctx context.Context) error {
	cm, err := o.conf.dial(ctx, dialer{role: "mqtt output", log: o.log, net: o.net, onUp: o.onUp, onDown: o.onDown})
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.cm = cm
	o.mu.Unlock()
	o.log.Info("mqtt output connected", "broker", o.conf.addr(), "client_id", o.conf.ClientID)
	return nil
}

func (o *Output) onUp(*autopaho.ConnectionManager, *paho.Connack) {
	o.mu.Lock()
	o.lost = make(chan struct{})
	o.mu.Unlock()
}

func (o *Output) onDown() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lost == nil {
		return
	}
	select {
	case <-o.lost:
	default:
		close(o.lost)
	}
}

// Write publishes the messages of b in order, each waiting for the
// broker's acknowledgement at QoS 1 and 2. It returns nil only when all
// were acknowledged; on an error the runtime writes the whole batch again.
func (o *Output) Write(ctx context.Context, b message.Batch) error {
	o.mu.Lock()
	cm := o.cm
	o.mu.Unlock()
	if cm == nil {
		return errors.New("mqtt output: not connected")
	}
	for i := range b.Messages {
		m := &b.Messages[i]
		topic, err := o.topic.String(m)
		if err != nil {
			return fmt.Errorf("mqtt output: %w", err)
		}
		if err := validTopicName(topic); err != nil {
			return fmt.Errorf("mqtt output: topic %q: %w", topic, err)
		}
		payload, err := m.Payload()
		if err != nil {
			return fmt.Errorf("mqtt output: %w", err)
		}
		if err := o.publish(ctx, cm, &paho.Publish{
			Topic: topic, QoS: byte(o.conf.QoS), Retain: o.conf.Retain, Payload: payload,
		}); err != nil {
			return err
		}
	}
	return nil
}

// publish sends one message, waiting up to connect_timeout_ms for a
// connection when the client is reconnecting.
func (o *Output) publish(ctx context.Context, cm *autopaho.ConnectionManager, p *paho.Publish) error {
	wait, cancel := context.WithTimeout(ctx, o.conf.connectTimeout())
	err := cm.AwaitConnection(wait)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("mqtt output: not connected to %s: %w", o.conf.addr(), err)
	}
	o.mu.Lock()
	lost := o.lost
	o.mu.Unlock()
	pubCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if lost != nil {
		go func() {
			select {
			case <-lost:
				cancel()
			case <-pubCtx.Done():
			}
		}()
	}
	resp, err := cm.Publish(pubCtx, p)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if pubCtx.Err() != nil {
			return fmt.Errorf("mqtt output: publish to %q: the connection was lost before the broker acknowledged it", p.Topic)
		}
		return fmt.Errorf("mqtt output: publish to %q: %w", p.Topic, err)
	}
	if resp != nil && resp.ReasonCode >= 0x80 {
		reason := ""
		if resp.Properties != nil {
			reason = resp.Properties.ReasonString
		}
		return fmt.Errorf("%w: topic %q, reason code 0x%02x %s", ErrRejected, p.Topic, resp.ReasonCode, reason)
	}
	return nil
}

// Close disconnects.
func (o *Output) Close(ctx context.Context) error {
	o.mu.Lock()
	cm := o.cm
	o.cm = nil
	o.mu.Unlock()
	if cm == nil {
		return nil
	}
	if err := cm.Disconnect(ctx); err != nil {
		return fmt.Errorf("mqtt output: disconnect: %w", err)
	}
	return nil
}
