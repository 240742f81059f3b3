package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/connect/strexpr"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/tracing"
)

func init() {
	component.Default.RegisterOutput(component.Spec{
		Name: "nats",
		Summary: "Publishes messages to a NATS subject given as a constant or an expression. `mode.type: regular` " +
			"is core NATS: Write returns once the server has read every message (a flush), and a subject " +
			"without subscribers drops them. `mode.type: jet_stream` waits for the stream's PubAck of every " +
			"message: at-least-once, and with `mode.msg_id` (the Nats-Msg-Id header) a batch that is retried " +
			"is de-duplicated by the server within the stream's duplicate window.",
		Schema: component.ObjectSchema(connProps(map[string]any{
			"mode": func() map[string]any {
				s := component.ObjectSchema(map[string]any{
					"type": component.EnumProp("`regular` (core publish) or `jet_stream` (publish and await "+
						"the PubAck); `jetstream` is accepted too.", "", modeRegular, modeJetStream, "jetstream"),
					"subject": strexpr.Schema("Subject to publish to."),
					"msg_id": strexpr.Schema("jet_stream: de-duplication id sent as the Nats-Msg-Id header, " +
						"e.g. `{type: expr, expr: 'this.id'}`; the stream drops a message whose id it saw within " +
						"its duplicate window."),
				}, "type", "subject")
				s["description"] = "How to publish: `{type: regular|jet_stream, subject, msg_id}`."
				s["if"] = map[string]any{"properties": map[string]any{"type": map[string]any{"const": modeRegular}}}
				s["then"] = map[string]any{"properties": map[string]any{"msg_id": false}}
				return s
			}(),
			"value_field": component.Prop("string", "Publish this field of the JSON message instead of the "+
				"whole payload (a string field as is, anything else as JSON).", nil),
			"metadata_headers": component.Prop("boolean", "Send the message's metadata fields as headers, "+
				"except the `nats_*` fields the nats input sets.", false),
			"headers": func() map[string]any {
				p := component.Prop("object", "Constant headers added to every message.", map[string]any{})
				p["additionalProperties"] = map[string]any{"type": "string"}
				return p
			}(),
			"timeout": component.DurationProp("Longest a Write waits for the flush or for the PubAcks of "+
				"its batch before failing it (the runtime then retries it).", "5s"),
		}), "url", "mode"),
		Example: `type: nats
url: nats://127.0.0.1:4222
mode:
  type: jet_stream
  subject:
    type: expr
    expr: '"orders." + this.region'
  msg_id:
    type: expr
    expr: 'this.id'
metadata_headers: true
timeout: 5s
`,
	}, NewOutput)
}

var _ component.Output = (*Output)(nil)

// OutputModeConfig is the mode object of the output.
type OutputModeConfig struct {
	Type    string `json:"type"`
	Subject any    `json:"subject"`
	MsgID   any    `json:"msg_id"`
}

// OutputConfig is the configuration of the nats output.
type OutputConfig struct {
	ConnConfig
	Mode            OutputModeConfig  `json:"mode"`
	ValueField      string            `json:"value_field"`
	MetadataHeaders bool              `json:"metadata_headers"`
	Headers         map[string]string `json:"headers"`
	Timeout         string            `json:"timeout"`
}

// Output publishes to core NATS or JetStream.
type Output struct {
	conn       conn
	jetstream  bool
	subject    *strexpr.Expr
	msgID      *strexpr.Expr // nil: no Nats-Msg-Id
	valueField string
	metaHdrs   bool
	headers    map[string]string
	timeout    time.Duration
	log        *slog.Logger
	down       chan struct{}

	// Owned by Connect, Write and Close (one goroutine at a time).
	nc *natsgo.Conn
	js jetstream.JetStream
}

// NewOutput builds a nats output from its configuration.
func NewOutput(conf map[string]any, res component.Resources) (component.Output, error) {
	c := OutputConfig{ConnConfig: defaultConnConfig(), Timeout: "5s"}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	cn, errs := parseConn(c.ConnConfig)
	cn.net = res.Net
	if res.Logger == nil {
		res.Logger = slog.New(slog.DiscardHandler)
	}
	o := &Output{conn: cn, valueField: c.ValueField, metaHdrs: c.MetadataHeaders, headers: c.Headers,
		log: res.Logger, down: make(chan struct{}, 1)}
	mode, err := normMode(c.Mode.Type)
	if err != nil {
		errs = append(errs, err)
	}
	o.jetstream = mode == modeJetStream
	if o.subject, err = strexpr.Parse("mode.subject", c.Mode.Subject); err != nil {
		errs = append(errs, err)
	} else if s, ok := o.subject.Static(); ok && !validSubject(s) {
		errs = append(errs, fmt.Errorf("mode.subject: %q is not a valid subject to publish to", s))
	}
	if c.Mode.MsgID != nil {
		if mode == modeRegular {
			errs = append(errs, errors.New("mode.msg_id: only with type jet_stream"))
		} else if o.msgID, err = strexpr.Parse("mode.msg_id", c.Mode.MsgID); err != nil {
			errs = append(errs, err)
		}
	}
	if o.timeout, err = parsePositive("timeout", c.Timeout); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return o, nil
}

// validSubject reports whether s can be published to: not empty, no
// wildcards, no whitespace, no empty tokens.
func validSubject(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n*>") {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" {
			return false
		}
	}
	return true
}

// Connect dials the server. It fails within connect_timeout when the
// server is down and may be called again after a failure.
func (o *Output) Connect(ctx context.Context) error {
	o.release()
	ctx, cancel := context.WithTimeout(ctx, o.conn.connectTimeout+5*time.Second)
	defer cancel()
	nc, err := o.conn.dial(ctx, o.log, "flowplane-output", o.down)
	if err != nil {
		return err
	}
	o.nc = nc
	if o.jetstream {
		if o.js, err = jetstream.New(nc); err != nil {
			o.release()
			return fmt.Errorf("nats: jetstream: %w", err)
		}
	}
	o.log.Info("nats output connected", "servers", o.conn.redacted, "jetstream", o.jetstream)
	return nil
}

// Write publishes every message of b and returns nil only when the server
// has them: after a flush (regular) or every PubAck (jet_stream). While
// the client reconnects it fails at once with ErrNotConnected.
func (o *Output) Write(ctx context.Context, b message.Batch) error {
	if o.nc == nil {
		return errors.New("nats: output is not connected")
	}
	if b.Len() == 0 {
		return ctx.Err()
	}
	if !o.nc.IsConnected() {
		return ErrNotConnected
	}
	drain(o.down) // a disconnect that is over already
	msgs := make([]*natsgo.Msg, b.Len())
	tc := traceOf(ctx)
	for i := range b.Messages {
		m, err := o.build(&b.Messages[i], tc)
		if err != nil {
			return err
		}
		msgs[i] = m
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if o.jetstream {
		return o.writeJetStream(ctx, msgs)
	}
	for _, m := range msgs {
		if err := o.nc.PublishMsg(m); err != nil {
			return o.publishErr(err)
		}
	}
	if err := o.nc.FlushWithContext(ctx); err != nil {
		return o.publishErr(err)
	}
	return nil
}

func (o *Output) writeJetStream(ctx context.Context, msgs []*natsgo.Msg) error {
	futs := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, m := range msgs {
		f, err := o.js.PublishMsgAsync(m)
		if err != nil {
			return o.publishErr(err)
		}
		futs = append(futs, f)
	}
	dups := 0
	for _, f := range futs {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				dups++
			}
		case err := <-f.Err():
			return o.publishErr(err)
		case <-o.down:
			return ErrNotConnected
		case <-ctx.Done():
			return fmt.Errorf("nats: waiting for the PubAcks of %d messages: %w", len(msgs), ctx.Err())
		}
	}
	if dups > 0 {
		o.log.Info("nats: the stream dropped duplicates (Nats-Msg-Id)", "duplicates", dups, "messages", len(msgs))
	}
	return nil
}

func (o *Output) publishErr(err error) error {
	if !o.nc.IsConnected() {
		return fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	return fmt.Errorf("nats: publish: %w", err)
}

// traceContext is the W3C trace context a traced batch's messages carry
// as headers; empty when the batch is not traced.
type traceContext struct{ parent, state string }

func traceOf(ctx context.Context) traceContext {
	tp, ts, _ := tracing.Headers(ctx)
	return traceContext{parent: tp, state: ts}
}

// build makes the NATS message of m, with the headers traceparent and
// tracestate of tc when the batch is traced (after metadata_headers and
// headers, so that a stale traceparent from the input does not win).
func (o *Output) build(m *message.Message, tc traceContext) (*natsgo.Msg, error) {
	subj, err := o.subject.String(m)
	if err != nil {
		return nil, err
	}
	if !validSubject(subj) {
		return nil, fmt.Errorf("mode.subject: %q is not a valid subject to publish to", subj)
	}
	data, err := o.payload(m)
	if err != nil {
		return nil, err
	}
	out := &natsgo.Msg{Subject: subj, Data: data}
	set := func(k, v string) {
		if out.Header == nil {
			out.Header = natsgo.Header{}
		}
		out.Header.Set(k, v)
	}
	if o.metaHdrs {
		for k, v := range m.Meta.Fields {
			if !strings.HasPrefix(k, "nats_") {
				set(k, v)
			}
		}
	}
	for k, v := range o.headers {
		set(k, v)
	}
	if o.msgID != nil {
		id, err := o.msgID.String(m)
		if err != nil {
			return nil, err
		}
		set(jetstream.MsgIDHeader, id)
	}
	if tc.parent != "" {
		set(tracing.TraceParent, tc.parent)
		if tc.state != "" {
			set(tracing.TraceState, tc.state)
		}
	}
	return out, nil
}

func (o *Output) payload(m *message.Message) ([]byte, error) {
	if o.valueField == "" {
		p, err := m.Payload()
		if err != nil {
			return nil, fmt.Errorf("nats: %w", err)
		}
		return p, nil
	}
	v, err := m.Structured()
	if err != nil {
		return nil, fmt.Errorf("value_field: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("value_field: the message is a %T, not a JSON object", v)
	}
	f, ok := obj[o.valueField]
	if !ok {
		return nil, fmt.Errorf("value_field: the message has no field %q", o.valueField)
	}
	if s, ok := f.(string); ok {
		return []byte(s), nil
	}
	return json.Marshal(f)
}

func (o *Output) release() {
	if o.nc != nil {
		o.nc.Close()
		o.nc, o.js = nil, nil
	}
	drain(o.down) // a disconnect of an old connection says nothing of the next
}

// Close closes the connection; with jet_stream, Write already waited for
// every PubAck, so nothing is pending.
func (o *Output) Close(context.Context) error {
	o.release()
	return nil
}
