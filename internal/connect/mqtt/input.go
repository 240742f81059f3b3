package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session"
	"github.com/eclipse/paho.golang/paho/session/state"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

func init() {
	props := clientProps(false)
	topics := component.Prop("array", "Topic filters to subscribe to (wildcards + and #, shared subscriptions $share/group/filter).", nil)
	topics["items"] = map[string]any{"type": "string", "minLength": 1, "pattern": topicFilterPattern}
	topics["minItems"] = 1
	props["topics"] = topics
	bs := component.Prop("integer", "Maximum number of messages per batch: a batch holds what has arrived, up to this many, without waiting for more.", 1)
	bs["minimum"] = 1
	props["batch_size"] = bs
	component.Default.RegisterInput(component.Spec{
		Name: "mqtt",
		Summary: "Subscribes to MQTT topics (MQTT 5, QoS 0/1/2). QoS 1 and 2 messages are acknowledged to the broker " +
			"(PUBACK, or PUBREC for QoS 2) only after the stream delivered them, in arrival order, so a crash or " +
			"disconnect makes the broker deliver them again (at-least-once). With clean_session false (the default) " +
			"the broker keeps the subscription and queues messages while the client is away.",
		Schema: component.ObjectSchema(props, "host", "port", "client_id", "topics"),
		Example: `type: mqtt
host: 127.0.0.1
port: 1883
client_id: flowplane-sensors
username: flowplane
password: ${secret:env:MQTT_PASSWORD}
topics:
  - sensors/+/temperature
  - sensors/+/humidity
qos: 1
clean_session: false
keep_alive: 60
batch_size: 100
`,
	}, NewInput)
}

var _ component.Input = (*Input)(nil)

// InputConfig is the configuration of the mqtt input.
type InputConfig struct {
	ClientConfig
	Topics    []string `json:"topics"`
	BatchSize int      `json:"batch_size"`
}

// received is one incoming message and the client that must acknowledge
// it: after a reconnect, messages of the old connection cannot be
// acknowledged any more and the broker sends them again.
type received struct {
	pub *paho.Publish
	cli *paho.Client
}

// pending is a batch whose acknowledgement failed, kept to be read again.
type pending struct {
	batch message.Batch
	recv  []received
}

// Input subscribes to MQTT topics.
type Input struct {
	conf InputConfig
	log  *slog.Logger
	net  sandbox.Net // the broker is dialled through it

	incoming chan received // fed by paho's receive goroutine
	wake     chan struct{} // buffered(1): a failed batch was queued
	closed   chan struct{}
	close    sync.Once

	// acks is the session of the input's connections; it counts the
	// acknowledgements paho sent, and released those the stream let go.
	acks     *ackSession
	released atomic.Uint64

	mu       sync.Mutex // guards cm, redo, subReady
	cm       *autopaho.ConnectionManager
	redo     []pending
	subReady chan error // result of the first subscription of a Connect
}

// NewInput builds an mqtt input from its configuration.
func NewInput(conf map[string]any, res component.Resources) (component.Input, error) {
	c := InputConfig{ClientConfig: newClientConfig(), BatchSize: 1}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	c.defaults(false)
	errs := c.validate()
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("topics: at least one is required"))
	}
	for i, t := range c.Topics {
		if err := validTopicFilter(t); err != nil {
			errs = append(errs, fmt.Errorf("topics[%d]: %q: %w", i, t, err))
		}
	}
	if c.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("batch_size: must be at least 1, got %d", c.BatchSize))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Input{
		conf:     c,
		log:      res.Logger,
		net:      res.Net,
		incoming: make(chan received, max(c.BatchSize, 64)),
		wake:     make(chan struct{}, 1),
		closed:   make(chan struct{}),
		acks:     &ackSession{SessionManager: state.NewInMemory()},
	}, nil
}

// Connect connects, subscribes, and waits for the broker's SUBACK. It
// fails within connect_timeout_ms when the broker is unreachable and may
// be called again after a failure. Once connected, the client reconnects
// and subscribes again by itself.
func (in *Input) Connect(ctx context.Context) error {
	sub := make(chan error, 1)
	in.mu.Lock()
	in.subReady = sub
	in.mu.Unlock()
	cm, err := in.conf.dial(ctx, dialer{
		role: "mqtt input", log: in.log, net: in.net, manualAck: true, session: in.acks,
		onUp:      in.onUp,
		onPublish: in.onPublish,
	})
	if err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, in.conf.connectTimeout()+time.Second)
	defer cancel()
	select {
	case err = <-sub:
	case <-wait.Done():
		err = fmt.Errorf("no SUBACK within %s", in.conf.connectTimeout())
	}
	if err != nil {
		stop, cancelStop := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancelStop()
		_ = cm.Disconnect(stop)
		return fmt.Errorf("mqtt input: subscribe at %s: %w", in.conf.addr(), err)
	}
	in.mu.Lock()
	in.cm = cm
	in.mu.Unlock()
	in.log.Info("mqtt input connected", "broker", in.conf.addr(), "client_id", in.conf.ClientID, "topics", in.conf.Topics)
	return nil
}

// onUp subscribes on every connection: a broker that lost the session
// (restarted without persistence, or the session expired) must learn the
// subscriptions again. Retained messages are sent only for a subscription
// the broker did not have.
func (in *Input) onUp(cm *autopaho.ConnectionManager, ack *paho.Connack) {
	in.mu.Lock()
	report := in.subReady
	in.subReady = nil
	in.mu.Unlock()
	go func() {
		err := in.subscribe(cm, ack.SessionPresent)
		if report != nil {
			report <- err
			return
		}
		if err != nil {
			in.log.Error("mqtt input: subscribing again after a reconnect failed", "broker", in.conf.addr(), "error", err)
			return
		}
		in.log.Info("mqtt input reconnected", "broker", in.conf.addr(), "session_present", ack.SessionPresent)
	}()
}

// subscribe subscribes to every topic. Some brokers (mochi) refuse a
// SUBSCRIBE whose packet identifier equals one of the messages they hold
// for a resumed session (reason 0x91, packet identifier in use); paho
// takes the next identifier on each try, so it is retried a few times,
// and when the broker kept the session (and so the subscriptions) a
// refusal is only logged.
func (in *Input) subscribe(cm *autopaho.ConnectionManager, sessionPresent bool) error {
	s := &paho.Subscribe{}
	for _, t := range in.conf.Topics {
		s.Subscriptions = append(s.Subscriptions, paho.SubscribeOptions{
			Topic: t, QoS: byte(in.conf.QoS), RetainHandling: 1,
		})
	}
	var err error
	for range 5 {
		var inUse bool
		inUse, err = in.subscribeOnce(cm, s)
		if !inUse {
			break
		}
	}
	if err != nil && sessionPresent {
		in.log.Warn("mqtt input: the broker refused the subscription; it kept the session, so the subscriptions made before hold",
			"broker", in.conf.addr(), "error", err)
		return nil
	}
	return err
}

// subscribeOnce sends one SUBSCRIBE and reports whether the broker
// answered packet identifier in use.
func (in *Input) subscribeOnce(cm *autopaho.ConnectionManager, s *paho.Subscribe) (inUse bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), in.conf.connectTimeout()+5*time.Second)
	defer cancel()
	ack, err := cm.Subscribe(ctx, s)
	if ack == nil {
		return false, err
	}
	var errs []error
	for i, r := range ack.Reasons {
		switch {
		case i >= len(in.conf.Topics):
		case r == 0x91:
			inUse = true
			errs = append(errs, fmt.Errorf("topics[%d] %q: the broker refused the subscription: packet identifier in use", i, in.conf.Topics[i]))
		case r >= 0x80:
			errs = append(errs, fmt.Errorf("topics[%d] %q: the broker refused the subscription (reason code 0x%02x)", i, in.conf.Topics[i], r))
		case int(r) < in.conf.QoS:
			in.log.Warn("mqtt input: the broker granted a lower QoS", "topic", in.conf.Topics[i], "qos", in.conf.QoS, "granted", r)
		}
	}
	if len(errs) > 0 {
		return inUse, errors.Join(errs...)
	}
	return false, nil
}

// onPublish runs on paho's receive goroutine. Blocking it holds back
// further messages, which is the back-pressure we want.
func (in *Input) onPublish(p paho.PublishReceived) (bool, error) {
	select {
	case in.incoming <- received{pub: p.Packet, cli: p.Client}:
	case <-in.closed:
	}
	return true, nil
}

// Read returns the messages that have arrived, at least one and at most
// batch_size, waiting for the first. A batch whose acknowledgement failed
// is returned again first.
func (in *Input) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if p, ok := in.nextRedo(); ok {
		return p.batch, in.ackFor(p), nil
	}
	var first received
	select {
	case first = <-in.incoming:
	case <-in.wake:
		if p, ok := in.nextRedo(); ok {
			return p.batch, in.ackFor(p), nil
		}
		return in.Read(ctx)
	case <-ctx.Done():
		return message.Batch{}, nil, ctx.Err()
	case <-in.closed:
		return message.Batch{}, nil, message.ErrEndOfInput
	}
	recv := []received{first}
	for len(recv) < in.conf.BatchSize {
		select {
		case r := <-in.incoming:
			recv = append(recv, r)
			continue
		default:
		}
		break
	}
	p := pending{batch: message.Batch{Messages: make([]message.Message, len(recv))}, recv: recv}
	now := time.Now()
	for i, r := range recv {
		p.batch.Messages[i] = toMessage(r.pub, now)
	}
	return p.batch, in.ackFor(p), nil
}

// toMessage converts an incoming PUBLISH.
func toMessage(pub *paho.Publish, now time.Time) message.Message {
	m := message.New(pub.Payload)
	m.Meta.Source = pub.Topic
	m.Meta.IngestTime = now
	f := map[string]string{}
	if pub.Properties != nil {
		for _, u := range pub.Properties.User {
			f[u.Key] = u.Value
		}
		if pub.Properties.ContentType != "" {
			f["mqtt_content_type"] = pub.Properties.ContentType
		}
	}
	f["mqtt_topic"] = pub.Topic
	f["mqtt_qos"] = strconv.Itoa(int(pub.QoS))
	f["mqtt_retained"] = strconv.FormatBool(pub.Retain)
	f["mqtt_duplicate"] = strconv.FormatBool(pub.Duplicate())
	m.Meta.Fields = f
	return m
}

// ackFor returns the AckFunc of p: nil releases the MQTT acknowledgements
// (paho sends them in arrival order, so one batch held back holds back
// later ones too); an error keeps p to be read again.
func (in *Input) ackFor(p pending) message.AckFunc {
	p.batch = message.Batch{Messages: slices.Clone(p.batch.Messages)}
	return func(_ context.Context, err error) error {
		if err != nil {
			in.log.Warn("mqtt input: batch failed; redelivering it", "messages", p.batch.Len(), "error", err)
			in.mu.Lock()
			in.redo = append(in.redo, p)
			in.mu.Unlock()
			select {
			case in.wake <- struct{}{}:
			default:
			}
			return nil
		}
		for _, r := range p.recv {
			if r.pub.QoS == 0 {
				continue
			}
			// An error means the connection the message came on is gone:
			// the broker sends the message again on the next one.
			if err := r.cli.Ack(r.pub); err != nil {
				in.log.Debug("mqtt input: acknowledgement not sent; the broker will redeliver", "topic", r.pub.Topic, "error", err)
				continue
			}
			in.released.Add(1)
		}
		return nil
	}
}

func (in *Input) nextRedo() (pending, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.redo) == 0 {
		return pending{}, false
	}
	p := in.redo[0]
	in.redo[0] = pending{}
	in.redo = in.redo[1:]
	return p, true
}

// closeAckWait bounds how long Close waits for released acknowledgements
// to be sent.
const closeAckWait = 2 * time.Second

// ackSession is an input's session state; it counts the acknowledgements
// (PUBACK, PUBREC) it wrote, so that Close can wait for them.
type ackSession struct {
	session.SessionManager
	sent atomic.Uint64
}

// Ack writes the acknowledgement of pb and counts it.
func (s *ackSession) Ack(pb *packets.Publish) error {
	err := s.SessionManager.Ack(pb)
	s.sent.Add(1)
	return err
}

// Close disconnects. Unacknowledged QoS 1/2 messages stay with the broker
// (in the session when clean_session is false) and are delivered again.
func (in *Input) Close(ctx context.Context) error {
	in.close.Do(func() { close(in.closed) })
	in.mu.Lock()
	cm := in.cm
	in.cm = nil
	in.mu.Unlock()
	if cm == nil {
		return nil
	}
	// paho sends released acknowledgements every ackInterval, in order:
	// wait until it sent them all, else the broker delivers acknowledged
	// messages again. Bounded: acknowledgements released on a connection
	// that was lost since are never sent (the broker redelivers those).
	deadline := time.NewTimer(closeAckWait)
	defer deadline.Stop()
	tick := time.NewTicker(ackInterval)
	defer tick.Stop()
	// Then a few ticks more, for the broker's answers (PUBREL, for QoS 2)
	// to be answered before the connection ends.
	settle := 3
	for settle > 0 {
		if in.acks.sent.Load() < in.released.Load() {
			settle = 3
		} else {
			settle--
		}
		select {
		case <-tick.C:
			continue
		case <-deadline.C:
		case <-ctx.Done():
		}
		break
	}
	if err := cm.Disconnect(ctx); err != nil {
		return fmt.Errorf("mqtt input: disconnect: %w", err)
	}
	return nil
}
