package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/goccy/go-json"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/connect/strexpr"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/tracing"
)

func init() {
	acks := map[string]any{
		"description": "Acknowledgements the leader waits for: 0, 1 or all. Only all allows the idempotent producer.",
		"default":     "all",
		"enum":        []any{"0", "1", "all", "-1", 0, 1, -1},
	}
	component.Default.RegisterOutput(component.Spec{
		Name: "kafka",
		Summary: "Writes messages to Kafka with an idempotent producer and acks=all by default; a batch is accepted only " +
			"when every record is acknowledged. With exactly_once, a stream writes each batch in its own Kafka transaction. " +
			"In a job it writes through Kafka transactions committed with the checkpoint.",
		Schema: component.ObjectSchema(sharedProps(map[string]any{
			"topic":               strexpr.Schema("Topic of each record."),
			"key":                 strexpr.Schema("Key of each record (partitions by its hash unless partition is set)."),
			"partition":           strexpr.Schema("Partition of each record, a number; the key then does not choose it."),
			"compression":         component.EnumProp("Batch compression.", "none", "none", "gzip", "snappy", "lz4", "zstd"),
			"acks":                acks,
			"idempotent":          component.Prop("boolean", "Use the idempotent producer (no duplicates from the producer's own retries). Defaults to true with acks all.", nil),
			"value_field":         component.Prop("string", "Write this field of the JSON message as the record value instead of the whole message.", nil),
			"exactly_once":        component.Prop("boolean", "In a stream, write each batch in one Kafka transaction (atomic per batch: read_committed consumers see all of it or none); needs acks all and the idempotent producer. A job's sink is transactional whatever this says.", false),
			"transactional_id":    component.Prop("string", "Prefix of the transactional ids: a stream's with exactly_once is <prefix>-<stream id> (prefix default flowplane), a job sink's <prefix>-<operator>-<subtask>-<slot> (prefix default flowplane-<job id>).", nil),
			"transaction_timeout": component.DurationProp("Kafka transaction timeout in a job: a prepared transaction must be committed within it, also across a crash and restore, or the broker aborts it.", defaultTxnTimeout),
		}), "brokers", "topic"),
		Example: `type: kafka
brokers: ["localhost:9092"]
topic: {type: value, value: orders-out}
key: {type: expr, expr: this.user_id}
compression: zstd
acks: all
`,
	}, NewOutput)
}

var _ component.Transactional = (*Output)(nil)

const defaultTxnTimeout = "10m"

// OutputConfig is the configuration of the kafka output.
type OutputConfig struct {
	clientConfig
	Topic              any    `json:"topic"`
	Key                any    `json:"key"`
	Partition          any    `json:"partition"`
	Compression        string `json:"compression"`
	Acks               any    `json:"acks"`
	Idempotent         *bool  `json:"idempotent"`
	ValueField         string `json:"value_field"`
	ExactlyOnce        bool   `json:"exactly_once"`
	TransactionalID    string `json:"transactional_id"`
	TransactionTimeout string `json:"transaction_timeout"`
}

// Output writes records to Kafka.
type Output struct {
	conf      OutputConfig
	dial      time.Duration
	net       sandbox.Net // the brokers are dialled through it
	log       *slog.Logger
	jobID     string
	topic     *strexpr.Expr
	key       *strexpr.Expr // nil: no key
	partition *strexpr.Expr // nil: partitioned by key
	opts      []kgo.Opt     // producer options
	txnTO     time.Duration

	cl  *kgo.Client
	txn *txnState   // nil outside a job
	eos *kgo.Client // a stream's transactional producer with exactly_once; nil until the first Write
}

// NewOutput builds a kafka output from its configuration; it does not
// contact the brokers.
func NewOutput(conf map[string]any, res component.Resources) (component.Output, error) {
	c := OutputConfig{Compression: "none", Acks: "all", TransactionTimeout: defaultTxnTimeout}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	dial, errs := c.validate()
	o := &Output{conf: c, dial: dial, net: res.Net, log: res.Logger, jobID: res.StreamID}
	if o.log == nil {
		o.log = slog.Default()
	}
	var err error
	if o.topic, err = strexpr.Parse("topic", c.Topic); err != nil {
		errs = append(errs, err)
	} else if v, ok := o.topic.Static(); ok && v == "" {
		errs = append(errs, errors.New("topic: empty"))
	}
	if c.Key != nil {
		if o.key, err = strexpr.Parse("key", c.Key); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Partition != nil {
		if o.partition, err = strexpr.Parse("partition", c.Partition); err != nil {
			errs = append(errs, err)
		} else if v, ok := o.partition.Static(); ok {
			if n, err := strconv.ParseInt(v, 10, 32); err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("partition: %q is not a partition number", v))
			}
		}
		o.opts = append(o.opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	switch c.Compression {
	case "none":
		o.opts = append(o.opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	case "gzip":
		o.opts = append(o.opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case "snappy":
		o.opts = append(o.opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "lz4":
		o.opts = append(o.opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "zstd":
		o.opts = append(o.opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		errs = append(errs, fmt.Errorf("compression: %q is not one of none, gzip, snappy, lz4, zstd", c.Compression))
	}
	acks := fmt.Sprint(c.Acks)
	switch acks {
	case "all", "-1":
		o.opts = append(o.opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		if c.Idempotent != nil && !*c.Idempotent {
			o.opts = append(o.opts, kgo.DisableIdempotentWrite())
		}
	case "0", "1":
		if c.Idempotent != nil && *c.Idempotent {
			errs = append(errs, fmt.Errorf("idempotent: the idempotent producer needs acks all, not %s", acks))
		}
		a := kgo.LeaderAck()
		if acks == "0" {
			a = kgo.NoAck()
		}
		o.opts = append(o.opts, kgo.RequiredAcks(a), kgo.DisableIdempotentWrite())
	default:
		errs = append(errs, fmt.Errorf("acks: %v is not one of 0, 1, all", c.Acks))
	}
	if c.ExactlyOnce {
		if acks != "all" && acks != "-1" {
			errs = append(errs, fmt.Errorf("exactly_once: transactions need acks all, not %s", acks))
		} else if c.Idempotent != nil && !*c.Idempotent {
			errs = append(errs, errors.New("exactly_once: transactions need the idempotent producer; remove idempotent: false"))
		}
	}
	o.txnTO, err = time.ParseDuration(c.TransactionTimeout)
	if err != nil || o.txnTO < time.Second {
		errs = append(errs, fmt.Errorf("transaction_timeout: %q is not a duration of at least 1s", c.TransactionTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

// Connect creates the producer and checks that a broker answers. It may be
// called again after it failed.
func (o *Output) Connect(ctx context.Context) error {
	if o.cl != nil {
		o.cl.Close()
		o.cl = nil
	}
	o.closeEOS()
	cl, err := kgo.NewClient(append(o.conf.opts(o.log, o.dial, o.net), o.opts...)...)
	if err != nil {
		return fmt.Errorf("kafka output: %w", err)
	}
	o.cl = cl
	if err := ping(ctx, cl, o.conf.Brokers, o.dial); err != nil {
		return fmt.Errorf("kafka output: %w", err)
	}
	return nil
}

// records turns a batch into records. When ctx holds a span (the batch is
// traced), every record carries its W3C trace context as the headers
// traceparent and tracestate, one shared header list for the batch.
func (o *Output) records(ctx context.Context, b message.Batch) ([]*kgo.Record, error) {
	recs := make([]*kgo.Record, 0, b.Len())
	var hdrs []kgo.RecordHeader
	if tp, ts, ok := tracing.Headers(ctx); ok {
		hdrs = []kgo.RecordHeader{{Key: tracing.TraceParent, Value: []byte(tp)}}
		if ts != "" {
			hdrs = append(hdrs, kgo.RecordHeader{Key: tracing.TraceState, Value: []byte(ts)})
		}
	}
	for i := range b.Messages {
		m := &b.Messages[i]
		r := &kgo.Record{Timestamp: m.Meta.Timestamp, Headers: hdrs}
		var err error
		if r.Value, err = o.value(m); err != nil {
			return nil, fmt.Errorf("kafka output: message %d: %w", i, err)
		}
		if r.Topic, err = o.topic.String(m); err != nil {
			return nil, fmt.Errorf("kafka output: message %d: %w", i, err)
		}
		if r.Topic == "" {
			return nil, fmt.Errorf("kafka output: message %d: topic: empty", i)
		}
		if o.key != nil {
			k, err := o.key.String(m)
			if err != nil {
				return nil, fmt.Errorf("kafka output: message %d: %w", i, err)
			}
			r.Key = []byte(k)
		}
		if o.partition != nil {
			s, err := o.partition.String(m)
			if err != nil {
				return nil, fmt.Errorf("kafka output: message %d: %w", i, err)
			}
			n, err := strconv.ParseInt(s, 10, 32)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("kafka output: message %d: partition: %q is not a partition number", i, s)
			}
			r.Partition = int32(n)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// value is the record value of m: the message, or its value_field.
func (o *Output) value(m *message.Message) ([]byte, error) {
	if o.conf.ValueField == "" {
		return m.Payload()
	}
	v, err := m.Structured()
	if err != nil {
		return nil, fmt.Errorf("value_field: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("value_field: the message is not a JSON object")
	}
	f, ok := obj[o.conf.ValueField]
	if !ok {
		return nil, fmt.Errorf("value_field: the message has no field %q", o.conf.ValueField)
	}
	if s, ok := f.(string); ok {
		return []byte(s), nil
	}
	return json.Marshal(f)
}

// Write produces the batch and returns nil only when the brokers
// acknowledged every record. After an error some records may have been
// written: a retried batch can then leave duplicates (at-least-once).
func (o *Output) Write(ctx context.Context, b message.Batch) error {
	if o.cl == nil {
		return errors.New("kafka output: Write before Connect")
	}
	if o.txn != nil {
		return o.writeTxn(ctx, b)
	}
	if o.conf.ExactlyOnce {
		return o.writeEOS(ctx, b)
	}
	recs, err := o.records(ctx, b)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	return produceErr(o.cl.ProduceSync(ctx, recs...))
}

// produceErr reports how many records of a produce failed, and the first
// error.
func produceErr(res kgo.ProduceResults) error {
	failed := 0
	var first error
	for _, r := range res {
		if r.Err != nil {
			failed++
			if first == nil {
				first = r.Err
			}
		}
	}
	if first != nil {
		return fmt.Errorf("kafka output: %d of %d records were not acknowledged: %w", failed, len(res), first)
	}
	return nil
}

// Close closes the producer. In a job, open transactions are left for the
// next Begin of this operator and subtask to commit or abort.
func (o *Output) Close(context.Context) error {
	o.closeTxn()
	o.closeEOS()
	if o.cl != nil {
		o.cl.Close()
		o.cl = nil
	}
	return nil
}
