package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterInput(component.Spec{
		Name: "nats",
		Summary: "Reads NATS core subjects (`mode.type: regular`, optionally in a queue group) or a JetStream " +
			"stream through a durable pull consumer (`mode.type: jet_stream`). Core NATS is at-most-once by " +
			"nature: what arrives while the stream is down or slow is lost. JetStream is at-least-once: each " +
			"message is acked (AckExplicit) only after its batch was delivered, Nak'd for immediate redelivery " +
			"when delivery failed, and redelivered after `ack_wait` when the ack was lost.",
		Schema: component.ObjectSchema(connProps(map[string]any{
			"mode": inputModeSchema(),
			"batch_size": func() map[string]any {
				p := component.Prop("integer", "Most messages per batch. A batch holds what is already there: "+
					"Read does not wait to fill it.", 64)
				p["minimum"] = 1
				p["maximum"] = 10000
				return p
			}(),
			"max_wait": component.DurationProp("JetStream: how long one pull request waits on the server "+
				"for messages; an outage is noticed within about this long.", "1s"),
		}), "url", "mode"),
		Example: `type: nats
url: nats://127.0.0.1:4222
mode:
  type: jet_stream
  stream: ORDERS
  consumer_name: flowplane
  durable_name: flowplane
  filter_subject: orders.>
  ack_wait: 30s
batch_size: 64
max_wait: 1s
`,
	}, NewInput)
}

func inputModeSchema() map[string]any {
	s := component.ObjectSchema(map[string]any{
		"type": component.EnumProp("`regular` (core NATS subscription) or `jet_stream` (JetStream durable "+
			"pull consumer); `jetstream` is accepted too.", "", modeRegular, modeJetStream, "jetstream"),
		"subject":     component.Prop("string", "regular: subject to subscribe to (wildcards allowed).", nil),
		"queue_group": component.Prop("string", "regular: queue group; members share the messages.", nil),
		"stream":      component.Prop("string", "jet_stream: name of the stream (it must exist).", nil),
		"consumer_name": component.Prop("string", "jet_stream: name of the durable consumer, used when "+
			"`durable_name` is not given.", nil),
		"durable_name": component.Prop("string", "jet_stream: name of the durable consumer; takes "+
			"precedence over `consumer_name`.", nil),
		"filter_subject": component.Prop("string", "jet_stream: only messages on this subject, when the "+
			"consumer is created.", nil),
		"deliver": component.EnumProp("jet_stream: where a newly created consumer starts: `all` messages "+
			"of the stream, only `new` ones, or the `last`.", "all", "all", "new", "last"),
		"ack_wait": component.DurationProp("jet_stream: redelivery delay of a message whose ack did not "+
			"arrive, for a newly created consumer.", "30s"),
		"max_ack_pending": func() map[string]any {
			p := component.Prop("integer", "jet_stream: most unacknowledged messages, for a newly created "+
				"consumer.", 1000)
			p["minimum"] = 1
			return p
		}(),
	}, "type")
	ifType := func(t ...any) map[string]any {
		return map[string]any{"properties": map[string]any{"type": map[string]any{"enum": t}}}
	}
	s["allOf"] = []any{
		map[string]any{"if": ifType(modeRegular), "then": map[string]any{"required": []any{"subject"}}},
		map[string]any{"if": ifType(modeJetStream, "jetstream"), "then": map[string]any{"required": []any{"stream"}}},
	}
	s["description"] = "How to read: `{type: regular, subject, queue_group}` or " +
		"`{type: jet_stream, stream, consumer_name, durable_name}`."
	return s
}

var _ component.Input = (*Input)(nil)

// InputModeConfig is the mode object of the input.
type InputModeConfig struct {
	Type          string `json:"type"`
	Subject       string `json:"subject"`
	QueueGroup    string `json:"queue_group"`
	Stream        string `json:"stream"`
	ConsumerName  string `json:"consumer_name"`
	DurableName   string `json:"durable_name"`
	FilterSubject string `json:"filter_subject"`
	Deliver       string `json:"deliver"`
	AckWait       string `json:"ack_wait"`
	MaxAckPending int    `json:"max_ack_pending"`
}

// InputConfig is the configuration of the nats input.
type InputConfig struct {
	ConnConfig
	Mode      InputModeConfig `json:"mode"`
	BatchSize int             `json:"batch_size"`
	MaxWait   string          `json:"max_wait"`
}

// Input reads core subjects or a JetStream durable pull consumer.
type Input struct {
	conn      conn
	mode      InputModeConfig // Type normalised
	consumer  string          // jet_stream: the durable's name
	ackWait   time.Duration
	maxWait   time.Duration
	batchSize int
	log       *slog.Logger
	down      chan struct{} // signalled on disconnect (buffered 1)

	// Owned by Connect, Read and Close, which the runtime calls from one
	// goroutine, never at once.
	nc      *natsgo.Conn
	sub     *natsgo.Subscription   // regular
	msgs    chan *natsgo.Msg       // regular: the subscription's messages
	cons    jetstream.Consumer     // jet_stream
	cur     jetstream.MessageBatch // the pull request being read, nil between two
	curDone context.CancelFunc     // ends cur's context
	life    context.Context        // ends at Close; bounds pull requests
	stop    context.CancelFunc
}

// NewInput builds a nats input from its configuration.
func NewInput(conf map[string]any, res component.Resources) (component.Input, error) {
	c := InputConfig{ConnConfig: defaultConnConfig(), BatchSize: 64, MaxWait: "1s"}
	c.Mode.Deliver, c.Mode.AckWait, c.Mode.MaxAckPending = "all", "30s", 1000
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	cn, errs := parseConn(c.ConnConfig)
	cn.net = res.Net
	if res.Logger == nil {
		res.Logger = slog.New(slog.DiscardHandler)
	}
	in := &Input{conn: cn, batchSize: c.BatchSize, log: res.Logger, down: make(chan struct{}, 1)}
	if c.BatchSize < 1 {
		errs = append(errs, errors.New("batch_size: must be at least 1"))
	}
	var err error
	if in.maxWait, err = parsePositive("max_wait", c.MaxWait); err != nil {
		errs = append(errs, err)
	}
	m := c.Mode
	if m.Type, err = normMode(m.Type); err != nil {
		errs = append(errs, err)
	}
	switch m.Type {
	case modeRegular:
		if m.Subject == "" {
			errs = append(errs, errors.New("mode.subject: required with type regular"))
		}
		for f, v := range map[string]string{"stream": m.Stream, "consumer_name": m.ConsumerName,
			"durable_name": m.DurableName, "filter_subject": m.FilterSubject} {
			if v != "" {
				errs = append(errs, fmt.Errorf("mode.%s: only with type jet_stream", f))
			}
		}
	case modeJetStream:
		if m.Stream == "" {
			errs = append(errs, errors.New("mode.stream: required with type jet_stream"))
		}
		in.consumer = m.DurableName
		if in.consumer == "" {
			in.consumer = m.ConsumerName
		}
		if in.consumer == "" {
			errs = append(errs, errors.New("mode.consumer_name: required with type jet_stream (or durable_name)"))
		}
		if m.Subject != "" || m.QueueGroup != "" {
			errs = append(errs, errors.New("mode.subject: only with type regular (use filter_subject)"))
		}
		switch m.Deliver {
		case "all", "new", "last":
		default:
			errs = append(errs, fmt.Errorf("mode.deliver: must be all, new or last, got %q", m.Deliver))
		}
		if in.ackWait, err = parsePositive("mode.ack_wait", m.AckWait); err != nil {
			errs = append(errs, err)
		}
		if m.MaxAckPending < 1 {
			errs = append(errs, errors.New("mode.max_ack_pending: must be at least 1"))
		}
	}
	in.mode = m
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return in, nil
}

// Connect dials the server and subscribes (regular), or finds the stream
// and the durable consumer, creating the consumer when it is missing
// (jet_stream). It fails within connect_timeout when the server is down
// and may be called again after a failure.
func (in *Input) Connect(ctx context.Context) error {
	in.release()
	ctx, cancel := context.WithTimeout(ctx, in.conn.connectTimeout+5*time.Second)
	defer cancel()
	nc, err := in.conn.dial(ctx, in.log, "flowplane-input", in.down)
	if err != nil {
		return err
	}
	in.nc = nc
	in.life, in.stop = context.WithCancel(context.Background())
	if in.mode.Type == modeRegular {
		err = in.subscribe(ctx)
	} else {
		err = in.bind(ctx)
	}
	if err != nil {
		in.release()
		return err
	}
	in.log.Info("nats input connected", "servers", in.conn.redacted, "mode", in.mode.Type)
	return nil
}

func (in *Input) subscribe(ctx context.Context) error {
	in.msgs = make(chan *natsgo.Msg, max(4096, 4*in.batchSize))
	var err error
	if in.mode.QueueGroup != "" {
		in.sub, err = in.nc.ChanQueueSubscribe(in.mode.Subject, in.mode.QueueGroup, in.msgs)
	} else {
		in.sub, err = in.nc.ChanSubscribe(in.mode.Subject, in.msgs)
	}
	if err != nil {
		return fmt.Errorf("nats: subscribe to %q: %w", in.mode.Subject, err)
	}
	// The subscription is live on the server once Connect returns.
	if err := in.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("nats: subscribe to %q: %w", in.mode.Subject, err)
	}
	return nil
}

func (in *Input) bind(ctx context.Context) error {
	js, err := jetstream.New(in.nc)
	if err != nil {
		return fmt.Errorf("nats: jetstream: %w", err)
	}
	m := in.mode
	if _, err := js.Stream(ctx, m.Stream); err != nil {
		return fmt.Errorf("nats: stream %q: %w", m.Stream, err)
	}
	cons, err := js.Consumer(ctx, m.Stream, in.consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		dp := map[string]jetstream.DeliverPolicy{
			"all": jetstream.DeliverAllPolicy, "new": jetstream.DeliverNewPolicy, "last": jetstream.DeliverLastPolicy,
		}[m.Deliver]
		cons, err = js.CreateConsumer(ctx, m.Stream, jetstream.ConsumerConfig{
			Durable:       in.consumer,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       in.ackWait,
			MaxAckPending: m.MaxAckPending,
			DeliverPolicy: dp,
			FilterSubject: m.FilterSubject,
		})
		if err == nil {
			in.log.Info("nats created durable consumer", "stream", m.Stream, "consumer", in.consumer)
		}
	}
	if err != nil {
		return fmt.Errorf("nats: consumer %q of stream %q: %w", in.consumer, m.Stream, err)
	}
	cfg := cons.CachedInfo().Config
	if cfg.AckPolicy != jetstream.AckExplicitPolicy {
		return component.Permanent(fmt.Errorf("nats: consumer %q of stream %q has ack policy %s; "+
			"at-least-once needs explicit", in.consumer, m.Stream, cfg.AckPolicy))
	}
	if cfg.DeliverSubject != "" {
		return component.Permanent(fmt.Errorf("nats: consumer %q of stream %q is a push consumer; "+
			"a pull consumer is needed", in.consumer, m.Stream))
	}
	in.cons = cons
	return nil
}

// Read returns the messages that are there, up to batch_size, waiting for
// the first one. It returns ErrNotConnected while the client reconnects.
func (in *Input) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if in.nc == nil {
		return message.Batch{}, nil, errors.New("nats: input is not connected")
	}
	if in.mode.Type == modeRegular {
		return in.readCore(ctx)
	}
	return in.readJetStream(ctx)
}

func (in *Input) readCore(ctx context.Context) (message.Batch, message.AckFunc, error) {
	var first *natsgo.Msg
	select {
	case first = <-in.msgs:
	default:
		if !in.nc.IsConnected() {
			return message.Batch{}, nil, ErrNotConnected
		}
		drain(in.down) // a disconnect that is over already
		select {
		case first = <-in.msgs:
		case <-in.down:
			return message.Batch{}, nil, ErrNotConnected
		case <-ctx.Done():
			return message.Batch{}, nil, ctx.Err()
		}
	}
	msgs := []message.Message{coreMessage(first)}
	for len(msgs) < in.batchSize {
		select {
		case m := <-in.msgs:
			msgs = append(msgs, coreMessage(m))
			continue
		default:
		}
		break
	}
	// Core NATS has nothing to acknowledge: the messages are gone from
	// the server once delivered.
	return message.Batch{Messages: msgs}, message.NoopAck, nil
}

func coreMessage(m *natsgo.Msg) message.Message {
	msg := message.New(m.Data)
	msg.Meta.Source = m.Subject
	setHeaders(&msg, m.Header)
	msg.SetMeta("nats_subject", m.Subject)
	if m.Reply != "" {
		msg.SetMeta("nats_reply", m.Reply)
	}
	return msg
}

// setHeaders copies each header's first value into the metadata fields.
func setHeaders(msg *message.Message, h natsgo.Header) {
	for k, v := range h {
		if len(v) > 0 {
			msg.SetMeta(k, v[0])
		}
	}
}

func (in *Input) readJetStream(ctx context.Context) (message.Batch, message.AckFunc, error) {
	var first jetstream.Msg
	for first == nil {
		if in.cons == nil { // the consumer was deleted: find or create it again
			bctx, cancel := context.WithTimeout(ctx, in.conn.connectTimeout+5*time.Second)
			err := in.bind(bctx)
			cancel()
			if err != nil {
				return message.Batch{}, nil, err
			}
			in.log.Info("nats consumer bound again", "stream", in.mode.Stream, "consumer", in.consumer)
		}
		if in.cur == nil {
			if !in.nc.IsConnected() {
				return message.Batch{}, nil, ErrNotConnected
			}
			fctx, cancel := context.WithTimeout(in.life, in.maxWait)
			b, err := in.cons.Fetch(in.batchSize, jetstream.FetchContext(fctx))
			if err != nil {
				cancel()
				if !in.nc.IsConnected() {
					return message.Batch{}, nil, fmt.Errorf("%w: %w", ErrNotConnected, err)
				}
				return message.Batch{}, nil, in.pullErr(err)
			}
			in.cur, in.curDone = b, cancel
		}
		select {
		case m, ok := <-in.cur.Messages():
			if ok {
				first = m
				continue
			}
			err := in.cur.Error()
			in.endFetch()
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				return message.Batch{}, nil, in.pullErr(err)
			}
		case <-ctx.Done():
			return message.Batch{}, nil, ctx.Err()
		}
	}
	raw := []jetstream.Msg{first}
	for len(raw) < in.batchSize {
		select {
		case m, ok := <-in.cur.Messages():
			if ok {
				raw = append(raw, m)
				continue
			}
		default:
		}
		break
	}
	msgs := make([]message.Message, len(raw))
	for i, m := range raw {
		msgs[i] = in.jsMessage(m)
	}
	return message.Batch{Messages: msgs}, in.ackFor(raw), nil
}

// pullErr describes a failed pull. A consumer that no longer answers
// (deleted, or lost with a memory-backed server) is bound again by the
// next Read.
func (in *Input) pullErr(err error) error {
	if errors.Is(err, natsgo.ErrNoResponders) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
		errors.Is(err, jetstream.ErrConsumerNotFound) {
		in.cons = nil
		return fmt.Errorf("nats: consumer %q of stream %q is gone; the next read binds it again: %w",
			in.consumer, in.mode.Stream, err)
	}
	return fmt.Errorf("nats: pull from consumer %q: %w", in.consumer, err)
}

func (in *Input) jsMessage(m jetstream.Msg) message.Message {
	msg := message.New(m.Data())
	msg.Meta.Source = m.Subject()
	setHeaders(&msg, m.Headers())
	msg.SetMeta("nats_subject", m.Subject())
	if md, err := m.Metadata(); err == nil {
		msg.Meta.Offset = int64(md.Sequence.Stream)
		msg.Meta.Timestamp = md.Timestamp
		msg.SetMeta("nats_stream", md.Stream)
		msg.SetMeta("nats_consumer", md.Consumer)
		msg.SetMeta("nats_sequence_stream", strconv.FormatUint(md.Sequence.Stream, 10))
		msg.SetMeta("nats_num_delivered", strconv.FormatUint(md.NumDelivered, 10))
	}
	return msg
}

// ackFor acks every message of the batch when delivery succeeded and
// Naks them (immediate redelivery) when it failed. An ack that cannot be
// sent (disconnected) is reported; the server redelivers the message after
// ack_wait, so it is duplicated, never lost.
func (in *Input) ackFor(raw []jetstream.Msg) message.AckFunc {
	var once sync.Once
	return func(_ context.Context, err error) error {
		var res error
		once.Do(func() {
			var failed int
			var last error
			for _, m := range raw {
				var e error
				if err == nil {
					e = m.Ack()
				} else {
					e = m.Nak()
				}
				if e != nil {
					failed++
					last = e
				}
			}
			if err != nil {
				in.log.Warn("nats batch failed; redelivering it", "consumer", in.consumer, "messages", len(raw), "error", err)
			}
			if failed > 0 {
				res = fmt.Errorf("nats: %d of %d acks not sent (redelivered after ack_wait): %w", failed, len(raw), last)
				in.log.Warn("nats acks not sent; the server redelivers after ack_wait", "consumer", in.consumer,
					"failed", failed, "error", last)
			}
		})
		return res
	}
}

func (in *Input) endFetch() {
	in.curDone()
	in.cur, in.curDone = nil, nil
}

// release drops the connection and the subscription or pull in flight;
// messages pulled but not read are Nak'd so the server redelivers them at
// once.
func (in *Input) release() {
	if in.stop != nil {
		in.stop()
		in.stop = nil
	}
	if in.cur != nil {
		for m := range in.cur.Messages() {
			_ = m.Nak()
		}
		in.endFetch()
	}
	if in.sub != nil {
		_ = in.sub.Unsubscribe()
		in.sub = nil
	}
	if in.nc != nil {
		in.nc.Close()
		in.nc = nil
	}
	in.cons = nil
	drain(in.down) // a disconnect of an old connection says nothing of the next
}

// Close unsubscribes and closes the connection. Unacknowledged JetStream
// messages are redelivered by the server.
func (in *Input) Close(context.Context) error {
	in.release()
	return nil
}
