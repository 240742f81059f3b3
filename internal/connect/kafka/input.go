package kafka

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

func init() {
	partitions := component.Prop("array", "Read only these partitions of every listed topic, without a consumer group "+
		"(no offsets are committed). Leave out to read through consumer_group, or, without one, all partitions.", nil)
	partitions["items"] = map[string]any{"type": "integer", "minimum": 0}
	topics := component.Prop("array", "Topics to read.", nil)
	topics["items"] = map[string]any{"type": "string", "minLength": 1}
	topics["minItems"] = 1
	batch := component.Prop("integer", "Maximum number of records per batch.", defaultBatchSize)
	batch["minimum"] = 1
	intProp := func(desc string) map[string]any {
		p := component.Prop("integer", desc, nil)
		p["minimum"] = 0
		return p
	}
	component.Default.RegisterInput(component.Spec{
		Name: "kafka",
		Summary: "Reads Kafka topics through a consumer group (offsets committed only after the batch is acknowledged: " +
			"at-least-once) or from explicit partitions. In a job it splits partitions across subtasks and keeps " +
			"per-partition offsets in checkpoints, which a restore at another parallelism redistributes by partition.",
		Schema: component.ObjectSchema(sharedProps(map[string]any{
			"topics":                    topics,
			"consumer_group":            component.Prop("string", "Consumer group: partitions are balanced across its members and offsets committed to it after acknowledgement. Not used in a job.", nil),
			"partitions":                partitions,
			"start_from_latest":         component.Prop("boolean", "Start at the end of a partition rather than its beginning when there is no committed offset (the group's reset offset).", false),
			"batch_size":                batch,
			"fetch_min_bytes":           intProp("Minimum bytes a broker gathers before answering a fetch."),
			"fetch_max_bytes":           intProp("Maximum bytes of one fetch response."),
			"fetch_max_partition_bytes": intProp("Maximum bytes per partition in one fetch response."),
			"fetch_wait_max_ms":         intProp("Longest a broker waits for fetch_min_bytes, in milliseconds."),
		}), "brokers", "topics"),
		Example: `type: kafka
brokers: ["localhost:9092"]
topics: ["orders"]
consumer_group: flowplane-orders
client_id: flowplane
start_from_latest: false
batch_size: 500
`,
	}, NewInput)
}

var (
	_ component.Rescalable = (*Input)(nil)
)

const defaultBatchSize = 100

// InputConfig is the configuration of the kafka input.
type InputConfig struct {
	clientConfig
	Topics                 []string `json:"topics"`
	ConsumerGroup          string   `json:"consumer_group"`
	Partitions             []int32  `json:"partitions"`
	StartFromLatest        bool     `json:"start_from_latest"`
	BatchSize              int      `json:"batch_size"`
	FetchMinBytes          *int32   `json:"fetch_min_bytes"`
	FetchMaxBytes          *int32   `json:"fetch_max_bytes"`
	FetchMaxPartitionBytes *int32   `json:"fetch_max_partition_bytes"`
	FetchWaitMaxMs         *int     `json:"fetch_wait_max_ms"`
}

// Input reads Kafka records. It works in one of two modes, chosen at
// Connect:
//
//   - group: consumer_group is set, partitions is not, and the input was not
//     split for a job. The group assigns partitions; an acknowledged batch
//     marks its records, and the offsets up to the first unacknowledged
//     record of each partition are committed by a background goroutine.
//     Offsets of partitions the group revokes are committed at the
//     revocation; records of them read and not yet acknowledged are then
//     read again by the new owner.
//   - direct: the input reads the listed partitions (or all of them), split
//     across a job's subtasks, from the start offset or the position Seek
//     restored. Nothing is committed to Kafka: a job keeps positions in its
//     checkpoints.
type Input struct {
	conf    InputConfig
	dial    time.Duration
	net     sandbox.Net // the brokers are dialled through it
	log     *slog.Logger
	subtask int
	nsub    int // 0 until Split

	cl     *kgo.Client
	group  bool
	redo   redelivery
	track  *tracker      // group mode
	stop   func()        // stops the committer (group mode)
	doneC  chan struct{} // closed when the committer returned
	wake   chan struct{} // buffered(1): acknowledgements wake the committer
	direct directState   // owned by the goroutine that calls Read
}

// directState is the direct mode's read position, owned by the reading
// goroutine.
type directState struct {
	owned   []topicPartition
	next    map[topicPartition]int64 // next offset to read
	started bool
}

type topicPartition struct {
	Topic     string
	Partition int32
}

// NewInput builds a kafka input from its configuration; it does not
// contact the brokers.
func NewInput(conf map[string]any, res component.Resources) (component.Input, error) {
	c := InputConfig{BatchSize: defaultBatchSize}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	dial, errs := c.validate()
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("topics: at least one is required"))
	}
	for i, t := range c.Topics {
		if t == "" {
			errs = append(errs, fmt.Errorf("topics[%d]: empty", i))
		}
	}
	for i, p := range c.Partitions {
		if p < 0 {
			errs = append(errs, fmt.Errorf("partitions[%d]: %d is negative", i, p))
		}
	}
	if c.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("batch_size: must be at least 1, got %d", c.BatchSize))
	}
	if c.ConsumerGroup != "" && len(c.Partitions) > 0 {
		errs = append(errs, errors.New("partitions: cannot be combined with consumer_group (the group assigns partitions)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	log := res.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Input{conf: c, dial: dial, net: res.Net, log: log, redo: redelivery{log: log}}, nil
}

// Split makes this instance read partition i of the sorted (topic,
// partition) list when i mod subtasks == subtask. A split input never uses
// the consumer group.
func (in *Input) Split(subtask, subtasks int) error {
	if subtasks < 1 || subtask < 0 || subtask >= subtasks {
		return fmt.Errorf("kafka: subtask %d of %d is out of range", subtask, subtasks)
	}
	in.subtask, in.nsub = subtask, subtasks
	return nil
}

// Connect creates the client and checks that a broker answers; in direct
// mode it also reads the topics' partitions and start offsets. It may be
// called again after it failed.
func (in *Input) Connect(ctx context.Context) error {
	in.closeClient()
	in.group = in.conf.ConsumerGroup != "" && len(in.conf.Partitions) == 0 && in.nsub == 0
	opts := in.conf.opts(in.log, in.dial, in.net)
	if in.conf.FetchMinBytes != nil {
		opts = append(opts, kgo.FetchMinBytes(*in.conf.FetchMinBytes))
	}
	if in.conf.FetchMaxBytes != nil {
		opts = append(opts, kgo.FetchMaxBytes(*in.conf.FetchMaxBytes))
	}
	if in.conf.FetchMaxPartitionBytes != nil {
		opts = append(opts, kgo.FetchMaxPartitionBytes(*in.conf.FetchMaxPartitionBytes))
	}
	if in.conf.FetchWaitMaxMs != nil {
		opts = append(opts, kgo.FetchMaxWait(time.Duration(*in.conf.FetchWaitMaxMs)*time.Millisecond))
	}
	if in.group {
		start := kgo.NewOffset().AtStart()
		if in.conf.StartFromLatest {
			start = kgo.NewOffset().AtEnd()
		}
		in.track = &tracker{parts: map[topicPartition]*partTrack{}}
		opts = append(opts,
			kgo.ConsumerGroup(in.conf.ConsumerGroup),
			kgo.ConsumeTopics(in.conf.Topics...),
			kgo.ConsumeResetOffset(start),
			kgo.DisableAutoCommit(),
			kgo.OnPartitionsRevoked(in.revoked),
			kgo.OnPartitionsLost(in.lost),
		)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka input: %w", err)
	}
	in.cl = cl
	if err := ping(ctx, cl, in.conf.Brokers, in.dial); err != nil {
		return fmt.Errorf("kafka input: %w", err)
	}
	if in.group {
		cctx, cancel := context.WithCancel(context.Background())
		in.stop, in.doneC, in.wake = cancel, make(chan struct{}), make(chan struct{}, 1)
		go in.commitLoop(cctx, cl, in.track, in.doneC)
		return nil
	}
	return in.discover(ctx)
}

// discover lists the partitions this instance owns and their start
// offsets (direct mode).
func (in *Input) discover(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*in.dial)
	defer cancel()
	adm := kadm.NewClient(in.cl)
	var (
		offs kadm.ListedOffsets
		err  error
	)
	if in.conf.StartFromLatest {
		offs, err = adm.ListEndOffsets(ctx, in.conf.Topics...)
	} else {
		offs, err = adm.ListStartOffsets(ctx, in.conf.Topics...)
	}
	if err != nil {
		return fmt.Errorf("kafka input: listing the partitions of %v: %w", in.conf.Topics, err)
	}
	var all []topicPartition
	for _, t := range in.conf.Topics {
		parts, ok := offs[t]
		if !ok {
			return fmt.Errorf("kafka input: topic %q does not exist", t)
		}
		for p, o := range parts {
			if o.Err != nil {
				return fmt.Errorf("kafka input: topic %q partition %d: %w", t, p, o.Err)
			}
			if len(in.conf.Partitions) == 0 || slices.Contains(in.conf.Partitions, p) {
				all = append(all, topicPartition{t, p})
			}
		}
		for _, p := range in.conf.Partitions {
			if _, ok := parts[p]; !ok {
				return fmt.Errorf("kafka input: topic %q has no partition %d", t, p)
			}
		}
	}
	slices.SortFunc(all, func(a, b topicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	d := directState{next: map[topicPartition]int64{}}
	for i, tp := range all {
		if in.nsub > 0 && i%in.nsub != in.subtask {
			continue
		}
		d.owned = append(d.owned, tp)
		d.next[tp] = offs[tp.Topic][tp.Partition].Offset
	}
	in.direct = d
	return nil
}

// Read returns the next records, at most batch_size, waiting for them
// until ctx ends.
func (in *Input) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if err := ctx.Err(); err != nil {
		return message.Batch{}, nil, err
	}
	if in.cl == nil {
		return message.Batch{}, nil, errors.New("kafka input: Read before Connect")
	}
	if b, spans, ok := in.redo.next(); ok {
		return b, in.ackFor(b, spans), nil
	}
	if !in.group && !in.direct.started {
		in.direct.started = true
		start := map[string]map[int32]kgo.Offset{}
		for _, tp := range in.direct.owned {
			if start[tp.Topic] == nil {
				start[tp.Topic] = map[int32]kgo.Offset{}
			}
			start[tp.Topic][tp.Partition] = kgo.NewOffset().At(in.direct.next[tp])
		}
		in.cl.AddConsumePartitions(start)
	}
	for {
		fs := in.cl.PollRecords(ctx, in.conf.BatchSize)
		if err := ctx.Err(); err != nil {
			return message.Batch{}, nil, err
		}
		if fs.IsClientClosed() {
			return message.Batch{}, nil, errors.New("kafka input: client closed")
		}
		failed := false
		fs.EachError(func(t string, p int32, err error) {
			failed = true
			in.log.Warn("kafka input: fetch failed; retrying", "topic", t, "partition", p, "error", err)
		})
		if fs.NumRecords() == 0 {
			if failed { // do not spin on a failing fetch
				select {
				case <-ctx.Done():
					return message.Batch{}, nil, ctx.Err()
				case <-time.After(250 * time.Millisecond):
				}
			}
			continue
		}
		b := message.Batch{Messages: make([]message.Message, 0, fs.NumRecords())}
		ends := map[topicPartition]kgo.EpochOffset{}
		fs.EachRecord(func(r *kgo.Record) {
			b.Messages = append(b.Messages, toMessage(r))
			tp := topicPartition{r.Topic, r.Partition}
			ends[tp] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
			if !in.group {
				in.direct.next[tp] = r.Offset + 1
			}
		})
		var spans []*span
		if in.group {
			spans = in.track.add(ends)
		}
		return b, in.ackFor(b, spans), nil
	}
}

// toMessage turns a record into a message with its broker facts in the
// metadata: headers first, so that they cannot hide the kafka_ fields.
func toMessage(r *kgo.Record) message.Message {
	m := message.New(r.Value)
	m.Meta.Key = r.Key
	m.Meta.Source = r.Topic
	m.Meta.Partition = r.Partition
	m.Meta.Offset = r.Offset
	m.Meta.Timestamp = r.Timestamp
	m.Meta.Fields = make(map[string]string, len(r.Headers)+4)
	for _, h := range r.Headers {
		m.Meta.Fields[h.Key] = string(h.Value)
	}
	m.Meta.Fields["kafka_topic"] = r.Topic
	m.Meta.Fields["kafka_partition"] = strconv.Itoa(int(r.Partition))
	m.Meta.Fields["kafka_offset"] = strconv.FormatInt(r.Offset, 10)
	if r.Key != nil {
		m.Meta.Fields["kafka_key"] = string(r.Key)
	}
	return m
}

// ackFor returns the AckFunc of b: nil marks its spans acknowledged (group
// mode commits them), an error queues b for redelivery.
func (in *Input) ackFor(b message.Batch, spans []*span) message.AckFunc {
	b = message.Batch{Messages: slices.Clone(b.Messages)}
	var once sync.Once
	return func(_ context.Context, err error) error {
		first := false
		once.Do(func() { first = true })
		if !first {
			return nil
		}
		if err != nil {
			in.redo.push(b, spans, err)
			return nil
		}
		if in.group && in.track.ack(spans) {
			select {
			case in.wake <- struct{}{}:
			default:
			}
		}
		return nil
	}
}

// Position returns the next offset of every partition this instance reads,
// as {"topic": {"partition": offset}}. Group mode has no position: a job
// must leave consumer_group out.
func (in *Input) Position() ([]byte, error) {
	if in.group {
		return nil, errors.New("kafka input: a consumer group input keeps no position for a job's checkpoints; " +
			"leave consumer_group out in a job (the job splits partitions and checkpoints offsets itself)")
	}
	pos := map[string]map[string]int64{}
	for _, tp := range in.direct.owned {
		if pos[tp.Topic] == nil {
			pos[tp.Topic] = map[string]int64{}
		}
		pos[tp.Topic][strconv.Itoa(int(tp.Partition))] = in.direct.next[tp]
	}
	return json.Marshal(pos)
}

// Seek continues each owned partition named in pos at its offset; owned
// partitions pos does not name start at the start offset.
func (in *Input) Seek(_ context.Context, raw []byte) error {
	if in.group {
		return errors.New("kafka input: cannot seek a consumer group input; leave consumer_group out in a job")
	}
	pos, err := parsePosition(raw)
	if err != nil {
		return err
	}
	if in.direct.started {
		return errors.New("kafka input: Seek after the first Read")
	}
	for _, tp := range in.direct.owned {
		if o, ok := pos[tp]; ok {
			in.direct.next[tp] = o
		}
	}
	return nil
}

// Rescale merges the offsets of every old subtask: positions are per
// partition, so each instance takes those of the partitions it now owns
// from the merged position at Seek.
func (in *Input) Rescale(old [][]byte) ([]byte, error) {
	merged := map[string]map[string]int64{}
	for _, raw := range old {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		pos, err := parsePosition(raw)
		if err != nil {
			return nil, err
		}
		for tp, o := range pos {
			if merged[tp.Topic] == nil {
				merged[tp.Topic] = map[string]int64{}
			}
			merged[tp.Topic][strconv.Itoa(int(tp.Partition))] = o
		}
	}
	return json.Marshal(merged)
}

// parsePosition reads a Position value.
func parsePosition(raw []byte) (map[topicPartition]int64, error) {
	var pos map[string]map[string]int64
	if err := json.Unmarshal(raw, &pos); err != nil {
		return nil, fmt.Errorf("kafka input: position %s: %w", raw, err)
	}
	out := map[topicPartition]int64{}
	for t, parts := range pos {
		for p, o := range parts {
			n, err := strconv.ParseInt(p, 10, 32)
			if err != nil || n < 0 || o < 0 {
				return nil, fmt.Errorf("kafka input: position %s: partition %q offset %d is invalid", raw, p, o)
			}
			out[topicPartition{t, int32(n)}] = o
		}
	}
	return out, nil
}

// Close commits what was acknowledged (group mode) and closes the client,
// leaving the group.
func (in *Input) Close(ctx context.Context) error {
	in.redo.end()
	in.closeClient()
	return nil
}

func (in *Input) closeClient() {
	if in.stop != nil {
		in.stop()
		<-in.doneC
		in.stop = nil
	}
	if in.cl != nil {
		if in.group {
			ctx, cancel := context.WithTimeout(context.Background(), in.dial)
			in.commit(ctx, in.cl, in.track.committable(nil))
			cancel()
		}
		in.cl.Close()
		in.cl = nil
	}
}
