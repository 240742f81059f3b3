package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/goccy/go-json"
	goredis "github.com/redis/go-redis/v9"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/connect/strexpr"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterOutput(component.Spec{
		Name: "redis",
		Summary: "Writes messages to Redis: `list` (RPUSH or LPUSH), `publish` (PUBLISH), `hashes` (HSET), " +
			"`strings` (SET, optional TTL) or `streams` (XADD, optional MAXLEN). Keys, channels and fields are " +
			"constants or per-message expressions. A batch is sent as one pipeline and accepted only when every " +
			"command succeeded; a retried batch may repeat commands (at-least-once; SET and HSET are idempotent, " +
			"RPUSH, PUBLISH and XADD are not).",
		Schema: component.ObjectSchema(map[string]any{
			"mode":        modeSchema(),
			"redis_type":  outputTypeSchema(),
			"value_field": component.Prop("string", "Top-level field of the (JSON) message to write instead of the whole payload; a string is written as is, anything else as JSON.", nil),
		}, "mode", "redis_type"),
		Example: `type: redis
mode:
  type: single
  url: redis://127.0.0.1:6379
redis_type:
  type: hashes
  key:
    type: expr
    expr: '"user:" + this.user_id'
  field:
    type: value
    value: profile
`,
	}, NewOutput)
}

func outputTypeSchema() map[string]any {
	ttl := component.DurationProp("strings: expiry of each key; unset or `0s` for none.", nil)
	maxLen := component.Prop("integer", "streams: trim the stream to about this many entries (XADD MAXLEN ~); 0 for no trimming.", 0)
	maxLen["minimum"] = 0
	s := component.ObjectSchema(map[string]any{
		"type": component.EnumProp("The command: `list`, `publish`, `hashes`, `strings` or `streams`.", "",
			"list", "publish", "hashes", "strings", "streams"),
		"key":     strexpr.Schema("list, hashes, strings, streams: the key written to."),
		"channel": strexpr.Schema("publish: the channel."),
		"field":   strexpr.Schema("hashes: the hash field set to the message; streams: the entry field holding the message (default `message`)."),
		"command": component.EnumProp("list: `rpush` appends, `lpush` prepends.", "rpush", "rpush", "lpush"),
		"ttl":     ttl,
		"max_len": maxLen,
	}, "type")
	s["description"] = "What to write: `{type: list, key}`, `{type: publish, channel}`, `{type: hashes, key, field}`, " +
		"`{type: strings, key, ttl}` or `{type: streams, key, max_len}`."
	return requireWhen(s, map[string][]string{
		"list": {"key"}, "publish": {"channel"}, "hashes": {"key", "field"}, "strings": {"key"}, "streams": {"key"},
	})
}

// OutputConfig is the configuration of the redis output.
type OutputConfig struct {
	Mode       ModeConfig       `json:"mode"`
	RedisType  OutputTypeConfig `json:"redis_type"`
	ValueField string           `json:"value_field,omitempty"`
}

// OutputTypeConfig is the output's redis_type.
type OutputTypeConfig struct {
	Type    string `json:"type"`
	Key     any    `json:"key,omitempty"`
	Channel any    `json:"channel,omitempty"`
	Field   any    `json:"field,omitempty"`
	Command string `json:"command,omitempty"`
	TTL     string `json:"ttl,omitempty"`
	MaxLen  int64  `json:"max_len,omitempty"`
}

var _ component.Output = (*Output)(nil)

// Output writes batches to Redis in pipelines.
type Output struct {
	conn       *connection
	kind       string
	key        *strexpr.Expr // list, hashes, strings, streams; the channel for publish
	field      *strexpr.Expr // hashes, streams
	lpush      bool
	ttl        time.Duration
	maxLen     int64
	valueField string
	log        *slog.Logger

	client goredis.UniversalClient
}

// NewOutput builds a redis output from its configuration.
func NewOutput(conf map[string]any, res component.Resources) (component.Output, error) {
	var c OutputConfig
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	conn, err := parseMode(c.Mode, res.Net)
	errs := []error{err}
	o := &Output{conn: conn, kind: c.RedisType.Type, valueField: c.ValueField, log: logger(res)}
	t := c.RedisType
	only := func(set bool, field string, kinds ...string) {
		if !set {
			return
		}
		for _, k := range kinds {
			if t.Type == k {
				return
			}
		}
		errs = append(errs, fmt.Errorf("redis_type.%s: only with type %s", field, joinOr(kinds)))
	}
	only(t.Key != nil, "key", "list", "hashes", "strings", "streams")
	only(t.Channel != nil, "channel", "publish")
	only(t.Field != nil, "field", "hashes", "streams")
	only(t.Command != "", "command", "list")
	only(t.TTL != "", "ttl", "strings")
	only(t.MaxLen != 0, "max_len", "streams")
	expr := func(field string, v any) *strexpr.Expr {
		e, err := strexpr.Parse("redis_type."+field, v)
		errs = append(errs, err)
		return e
	}
	switch t.Type {
	case "list":
		o.key = expr("key", t.Key)
		switch t.Command {
		case "", "rpush":
		case "lpush":
			o.lpush = true
		default:
			errs = append(errs, fmt.Errorf("redis_type.command: must be rpush or lpush, got %q", t.Command))
		}
	case "publish":
		o.key = expr("channel", t.Channel)
	case "hashes":
		o.key = expr("key", t.Key)
		o.field = expr("field", t.Field)
	case "strings":
		o.key = expr("key", t.Key)
		if t.TTL != "" {
			d, err := time.ParseDuration(t.TTL)
			if err != nil || d < 0 {
				errs = append(errs, fmt.Errorf("redis_type.ttl: %q is not a non-negative duration such as \"1h\"", t.TTL))
			}
			o.ttl = d
		}
	case "streams":
		o.key = expr("key", t.Key)
		if t.Field == nil {
			t.Field = "message"
		}
		o.field = expr("field", t.Field)
		if t.MaxLen < 0 {
			errs = append(errs, fmt.Errorf("redis_type.max_len: must not be negative, got %d", t.MaxLen))
		}
		o.maxLen = t.MaxLen
	case "":
		errs = append(errs, errors.New("redis_type.type: required (list, publish, hashes, strings or streams)"))
	default:
		errs = append(errs, fmt.Errorf("redis_type.type: must be list, publish, hashes, strings or streams, got %q", t.Type))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

func joinOr(kinds []string) string {
	s := ""
	for i, k := range kinds {
		switch {
		case i == 0:
		case i == len(kinds)-1:
			s += " or "
		default:
			s += ", "
		}
		s += k
	}
	return s
}

// Connect makes the client and checks that the server answers. It may be
// called again after it failed.
func (o *Output) Connect(ctx context.Context) error {
	if o.client != nil {
		_ = o.client.Close()
	}
	o.client = o.conn.client(false)
	if err := o.conn.ping(ctx, o.client); err != nil {
		return fmt.Errorf("redis output: %w", err)
	}
	return nil
}

// Write sends the batch as one pipeline (in cluster mode go-redis splits it
// per node). It returns nil only when every command succeeded; a message
// whose key cannot be computed fails the batch before anything is sent.
func (o *Output) Write(ctx context.Context, b message.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	p := o.client.Pipeline()
	for i := range b.Messages {
		if err := o.queue(ctx, p, &b.Messages[i]); err != nil {
			return fmt.Errorf("redis output: message %d: %w", i, err)
		}
	}
	cmds, err := p.Exec(ctx)
	if err != nil {
		failed := 0
		for _, c := range cmds {
			if c.Err() != nil {
				failed++
			}
		}
		return fmt.Errorf("redis output: %d of %d commands failed: %w", failed, len(cmds), err)
	}
	return nil
}

func (o *Output) queue(ctx context.Context, p goredis.Pipeliner, m *message.Message) error {
	val, err := o.value(m)
	if err != nil {
		return err
	}
	key, err := o.key.String(m)
	if err != nil {
		return err
	}
	switch o.kind {
	case "list":
		if o.lpush {
			p.LPush(ctx, key, val)
		} else {
			p.RPush(ctx, key, val)
		}
	case "publish":
		p.Publish(ctx, key, val)
	case "hashes":
		f, err := o.field.String(m)
		if err != nil {
			return err
		}
		p.HSet(ctx, key, f, val)
	case "strings":
		p.Set(ctx, key, val, o.ttl)
	case "streams":
		f, err := o.field.String(m)
		if err != nil {
			return err
		}
		p.XAdd(ctx, &goredis.XAddArgs{Stream: key, MaxLen: o.maxLen, Approx: o.maxLen > 0, Values: []any{f, val}})
	}
	return nil
}

// value is what is written for m: its payload, or its value_field.
func (o *Output) value(m *message.Message) ([]byte, error) {
	if o.valueField == "" {
		return m.Payload()
	}
	v, err := m.Structured()
	if err != nil {
		return nil, fmt.Errorf("value_field: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("value_field: the message is a %T, not an object", v)
	}
	f, ok := obj[o.valueField]
	if !ok || f == nil {
		return nil, fmt.Errorf("value_field: the message has no field %q", o.valueField)
	}
	if s, ok := f.(string); ok {
		return []byte(s), nil
	}
	return json.Marshal(f)
}

// Close disconnects.
func (o *Output) Close(context.Context) error {
	if o.client == nil {
		return nil
	}
	err := o.client.Close()
	o.client = nil
	return err
}
