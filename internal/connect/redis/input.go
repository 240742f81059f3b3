package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterInput(component.Spec{
		Name: "redis",
		Summary: "Reads Redis lists, pub/sub channels or streams. `list` moves each element into a processing " +
			"list (LMOVE/BLMOVE) and removes it there only once its batch is acknowledged; elements left there " +
			"by a crash are moved back on Connect (at-least-once). `streams` reads with a consumer group and " +
			"XACKs only acknowledged batches; this consumer's pending entries are read again on Connect and stale " +
			"ones of other consumers claimed with XAUTOCLAIM (at-least-once). `subscribe` is pub/sub: a message " +
			"published while the input is disconnected is never seen (at-most-once).",
		Schema: component.ObjectSchema(map[string]any{
			"mode":       modeSchema(),
			"redis_type": inputTypeSchema(),
			"batch_size": func() map[string]any {
				p := component.Prop("integer", "Maximum number of messages per batch; a batch holds what is "+
					"available, it does not wait to fill up.", 100)
				p["minimum"] = 1
				return p
			}(),
		}, "mode", "redis_type"),
		Example: `type: redis
mode:
  type: single
  url: redis://127.0.0.1:6379
redis_type:
  type: streams
  streams:
    - orders
  group: flowplane
batch_size: 100
`,
	}, NewInput)
}

func inputTypeSchema() map[string]any {
	strs := func(desc string) map[string]any {
		p := component.Prop("array", desc, nil)
		p["items"] = map[string]any{"type": "string", "minLength": 1}
		p["minItems"] = 1
		return p
	}
	sub := component.ObjectSchema(map[string]any{
		"type":     component.EnumProp("`channels` (SUBSCRIBE) or `patterns` (PSUBSCRIBE).", "", "channels", "patterns"),
		"channels": strs("Channels to subscribe to (type channels)."),
		"patterns": strs("Glob-style patterns to subscribe to (type patterns)."),
	}, "type")
	sub["description"] = "subscribe: what to subscribe to."
	sub = requireWhen(sub, map[string][]string{"channels": {"channels"}, "patterns": {"patterns"}})
	s := component.ObjectSchema(map[string]any{
		"type": component.EnumProp("What to read: `list`, `subscribe` or `streams`.", "", "list", "subscribe", "streams"),
		"list": strs("list: the keys of the lists to pop from (left end, so RPUSH producers give FIFO order)."),
		"processing_suffix": component.Prop("string", "list: suffix of the processing list kept per source "+
			"list (`{<key>}<suffix>`, or `<key><suffix>` when the key has a hash tag, so both share a cluster slot) for elements read but not yet acknowledged. Instances reading the same "+
			"list must use different suffixes.", ":processing"),
		"subscribe": sub,
		"streams":   strs("streams: the keys of the streams to read."),
		"group": component.Prop("string", "streams: the consumer group; created at the start of the stream "+
			"(see start_id) when missing.", nil),
		"consumer": component.Prop("string", "streams: this consumer's name in the group; keep it stable across "+
			"restarts so pending entries are read again. Default: the host name.", nil),
		"start_id": component.Prop("string", "streams: where a newly created group starts: `0` for the whole "+
			"stream, `$` for new entries only.", "0"),
		"field": component.Prop("string", "streams: the entry field holding the payload; the other fields go "+
			"to metadata. An entry without it becomes a JSON object of all its fields.", "message"),
		"claim_min_idle": component.DurationProp("streams: entries pending this long in the group (with any "+
			"consumer) are claimed with XAUTOCLAIM and delivered again; `0s` turns claiming off.", "5m"),
	}, "type")
	s["description"] = "What to read: `{type: list, list}`, `{type: subscribe, subscribe}` or " +
		"`{type: streams, streams, group}`."
	return requireWhen(s, map[string][]string{
		typeList: {"list"}, typeSubscribe: {"subscribe"}, typeStreams: {"streams", "group"},
	})
}

// InputConfig is the configuration of the redis input.
type InputConfig struct {
	Mode      ModeConfig      `json:"mode"`
	RedisType InputTypeConfig `json:"redis_type"`
	BatchSize int             `json:"batch_size"`
}

// InputTypeConfig is the input's redis_type.
type InputTypeConfig struct {
	Type             string           `json:"type"`
	List             []string         `json:"list,omitempty"`
	ProcessingSuffix *string          `json:"processing_suffix,omitempty"`
	Subscribe        *SubscribeConfig `json:"subscribe,omitempty"`
	Streams          []string         `json:"streams,omitempty"`
	Group            string           `json:"group,omitempty"`
	Consumer         string           `json:"consumer,omitempty"`
	StartID          string           `json:"start_id,omitempty"`
	Field            string           `json:"field,omitempty"`
	ClaimMinIdle     string           `json:"claim_min_idle,omitempty"`
}

// SubscribeConfig is what a subscribe input subscribes to.
type SubscribeConfig struct {
	Type     string   `json:"type"`
	Channels []string `json:"channels,omitempty"`
	Patterns []string `json:"patterns,omitempty"`
}

// Metadata fields the input sets.
const (
	MetaKey      = "redis_key"       // the list, channel or stream the message came from
	MetaPattern  = "redis_pattern"   // the pattern a subscribe message matched
	MetaStreamID = "redis_stream_id" // the id of a stream entry
)

// Read kinds.
const (
	typeList      = "list"
	typeSubscribe = "subscribe"
	typeStreams   = "streams"
)

// pollBlock is how long one XREADGROUP waits (BLMOVE waits a second),
// which also bounds how long Read takes to notice its ctx ended.
const pollBlock = 500 * time.Millisecond

var _ component.Input = (*Input)(nil)

// ref identifies what acknowledging one message removes: the element
// value in key's processing list, or the entry id in stream key.
type ref struct {
	key string
	val string
}

// held is a batch handed out and not yet acknowledged, with its refs.
type held struct {
	batch message.Batch
	refs  []ref
}

// Input reads a Redis list, channel set or stream set.
type Input struct {
	conn      *connection
	kind      string
	keys      []string // lists or streams
	suffix    string
	sub       SubscribeConfig
	group     string
	consumer  string
	startID   string
	field     string
	claimIdle time.Duration
	batchSize int
	log       *slog.Logger

	client goredis.UniversalClient
	pubsub *goredis.PubSub
	ch     <-chan *goredis.Message

	mu      sync.Mutex // guards redo, unacked, inflight
	redo    []held     // batches whose ack failed, handed out again first
	unacked []ref      // acknowledged refs whose LREM/XACK failed, retried by Read
	// inflight counts the refs handed out whose acknowledgement Redis has
	// not recorded yet (a list may hold equal elements).
	inflight map[ref]int

	// Owned by the goroutine that calls Connect and Read.
	rr        int               // next list to try first
	pending   []string          // streams: ids to read this consumer's pending entries from, "" when done
	claimNext map[string]string // streams: XAUTOCLAIM cursor per stream
	lastClaim time.Time
	// dirty is set when a read failed: its reply may have been lost after
	// Redis moved elements (list) or delivered entries (streams) to this
	// consumer. The next Read then looks for such orphans: elements in
	// the processing lists, entries in this consumer's pending list, that
	// are not in flight.
	dirty   bool
	orphans []ref        // list: orphaned elements still to hand out
	skip    map[ref]bool // streams: refs in flight when the pending re-read began
}

// NewInput builds a redis input from its configuration.
func NewInput(conf map[string]any, res component.Resources) (component.Input, error) {
	c := InputConfig{BatchSize: 100}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	var errs []error
	conn, err := parseMode(c.Mode, res.Net)
	errs = append(errs, err)
	if c.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("batch_size: must be at least 1, got %d", c.BatchSize))
	}
	in := &Input{
		conn: conn, batchSize: c.BatchSize, log: logger(res), suffix: ":processing",
		inflight: make(map[ref]int),
	}
	errs = append(errs, in.parseType(c.RedisType, res.StreamID))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return in, nil
}

func (in *Input) parseType(t InputTypeConfig, streamID string) error {
	var errs []error
	only := func(set bool, field, kind string) {
		if set && t.Type != kind {
			errs = append(errs, fmt.Errorf("redis_type.%s: only with type %s", field, kind))
		}
	}
	only(len(t.List) > 0, "list", typeList)
	only(t.ProcessingSuffix != nil, "processing_suffix", typeList)
	only(t.Subscribe != nil, "subscribe", typeSubscribe)
	only(len(t.Streams) > 0, "streams", typeStreams)
	only(t.Group != "", "group", typeStreams)
	only(t.Consumer != "", "consumer", typeStreams)
	only(t.StartID != "", "start_id", typeStreams)
	only(t.Field != "", "field", typeStreams)
	only(t.ClaimMinIdle != "", "claim_min_idle", typeStreams)
	in.kind = t.Type
	switch t.Type {
	case typeList:
		if len(t.List) == 0 {
			errs = append(errs, errors.New("redis_type.list: at least one key is required"))
		}
		if t.ProcessingSuffix != nil {
			if *t.ProcessingSuffix == "" {
				errs = append(errs, errors.New("redis_type.processing_suffix: must not be empty"))
			}
			in.suffix = *t.ProcessingSuffix
		}
		in.keys = t.List
	case typeSubscribe:
		switch {
		case t.Subscribe == nil:
			errs = append(errs, errors.New("redis_type.subscribe: required with type subscribe"))
		case t.Subscribe.Type == "channels" && len(t.Subscribe.Channels) == 0:
			errs = append(errs, errors.New("redis_type.subscribe.channels: at least one is required"))
		case t.Subscribe.Type == "patterns" && len(t.Subscribe.Patterns) == 0:
			errs = append(errs, errors.New("redis_type.subscribe.patterns: at least one is required"))
		case t.Subscribe.Type != "channels" && t.Subscribe.Type != "patterns":
			errs = append(errs, fmt.Errorf("redis_type.subscribe.type: must be channels or patterns, got %q", t.Subscribe.Type))
		case t.Subscribe.Type == "channels" && len(t.Subscribe.Patterns) > 0:
			errs = append(errs, errors.New("redis_type.subscribe.patterns: only with type patterns"))
		case t.Subscribe.Type == "patterns" && len(t.Subscribe.Channels) > 0:
			errs = append(errs, errors.New("redis_type.subscribe.channels: only with type channels"))
		default:
			in.sub = *t.Subscribe
		}
	case typeStreams:
		if len(t.Streams) == 0 {
			errs = append(errs, errors.New("redis_type.streams: at least one key is required"))
		}
		if t.Group == "" {
			errs = append(errs, errors.New("redis_type.group: required with type streams"))
		}
		in.keys, in.group, in.consumer = t.Streams, t.Group, t.Consumer
		if in.consumer == "" {
			h, err := os.Hostname()
			if err != nil || h == "" {
				h = "flowplane"
			}
			in.consumer = h
			if streamID != "" {
				in.consumer = h + "/" + streamID
			}
		}
		in.startID = cmpOr(t.StartID, "0")
		in.field = cmpOr(t.Field, "message")
		d, err := time.ParseDuration(cmpOr(t.ClaimMinIdle, "5m"))
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("redis_type.claim_min_idle: %q is not a non-negative duration such as \"5m\"", t.ClaimMinIdle))
		}
		in.claimIdle = d
	case "":
		errs = append(errs, errors.New("redis_type.type: required (list, subscribe or streams)"))
	default:
		errs = append(errs, fmt.Errorf("redis_type.type: must be list, subscribe or streams, got %q", t.Type))
	}
	return errors.Join(errs...)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Connect checks the server answers, then per kind: moves elements left in
// processing lists back to their lists, subscribes, or creates the
// consumer group and arranges for this consumer's pending entries to be
// read first. It may be called again after it failed.
func (in *Input) Connect(ctx context.Context) error {
	in.closeClient()
	in.dirty, in.orphans, in.skip = false, nil, nil
	in.client = in.conn.client(true)
	if err := in.conn.ping(ctx, in.client); err != nil {
		return fmt.Errorf("redis input: %w", err)
	}
	switch in.kind {
	case typeList:
		for _, k := range in.keys {
			n, err := in.recover(ctx, k)
			if err != nil {
				return fmt.Errorf("redis input: move unacknowledged elements of %q back: %w", k, err)
			}
			if n > 0 {
				in.log.Info("moved unacknowledged elements back to their list", "list", k, "elements", n)
			}
		}
	case typeSubscribe:
		if in.sub.Type == "patterns" {
			in.pubsub = in.client.PSubscribe(ctx, in.sub.Patterns...)
		} else {
			in.pubsub = in.client.Subscribe(ctx, in.sub.Channels...)
		}
		cctx, cancel := context.WithTimeout(ctx, 2*dialTimeout)
		_, err := in.pubsub.Receive(cctx) // the subscription's confirmation
		cancel()
		if err != nil {
			return fmt.Errorf("redis input: subscribe: %w", err)
		}
		in.ch = in.pubsub.Channel(goredis.WithChannelSize(max(in.batchSize, 100)))
	case typeStreams:
		for _, k := range in.keys {
			err := in.client.XGroupCreateMkStream(ctx, k, in.group, in.startID).Err()
			if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
				err = fmt.Errorf("redis input: create group %q on stream %q: %w", in.group, k, err)
				if strings.Contains(err.Error(), "WRONGTYPE") {
					err = component.Permanent(err) // the key holds something else: retrying cannot help
				}
				return err
			}
		}
		in.pending = make([]string, len(in.keys))
		for i := range in.pending {
			in.pending[i] = "0"
		}
		in.claimNext = make(map[string]string, len(in.keys))
		in.lastClaim = time.Now()
	}
	return nil
}

// proc is the processing list of list key. It lies in key's hash slot, so
// that LMOVE between them works in a cluster: key's own hash tag when it
// has one, else key itself made the tag (`{orders}:processing`).
func (in *Input) proc(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key + in.suffix
		}
	}
	return "{" + key + "}" + in.suffix
}

// recover moves every element of key's processing list back to the head
// of key, oldest first, and returns how many it moved.
func (in *Input) recover(ctx context.Context, key string) (int, error) {
	proc := in.proc(key)
	moved := 0
	for {
		p := in.client.Pipeline()
		cmds := make([]*goredis.StringCmd, 256)
		for i := range cmds {
			cmds[i] = p.LMove(ctx, proc, key, "RIGHT", "LEFT")
		}
		_, err := p.Exec(ctx)
		for _, c := range cmds {
			if c.Err() == goredis.Nil {
				return moved, nil
			}
			if c.Err() != nil {
				return moved, c.Err()
			}
			moved++
		}
		if err != nil && err != goredis.Nil {
			return moved, err
		}
	}
}

// Read returns the next batch: one waiting for redelivery first, else new
// data, waiting up to ctx's end for some.
func (in *Input) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	in.retryAcks(ctx)
	if h, ok := in.nextRedo(); ok {
		return h.batch, in.ackFor(h), nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return message.Batch{}, nil, err
		}
		if in.kind == typeSubscribe {
			return in.readSubscribe(ctx)
		}
		if in.dirty {
			if err := in.reconcile(ctx); err != nil {
				return message.Batch{}, nil, fmt.Errorf("redis input: look for unread elements after a failure: %w", err)
			}
			in.dirty = false
		}
		var (
			h   held
			err error
		)
		if in.kind == typeList {
			h, err = in.readList(ctx)
		} else {
			h, err = in.readStreams(ctx)
		}
		if err != nil {
			in.dirty = true
			if ctx.Err() != nil {
				return message.Batch{}, nil, ctx.Err()
			}
			return message.Batch{}, nil, fmt.Errorf("redis input: %w", err)
		}
		if h.batch.Len() > 0 {
			in.mu.Lock()
			for _, r := range h.refs {
				in.inflight[r]++
			}
			in.mu.Unlock()
			return h.batch, in.ackFor(h), nil
		}
	}
}

// reconcile, after a failed read, finds what Redis handed to this input
// without the input seeing it: processing-list elements (list) or
// pending entries of this consumer (streams) that are not in flight.
func (in *Input) reconcile(ctx context.Context) error {
	in.mu.Lock()
	snap := make(map[ref]int, len(in.inflight))
	for r, n := range in.inflight {
		snap[r] = n
	}
	in.mu.Unlock()
	if in.kind == typeStreams {
		in.skip = make(map[ref]bool, len(snap))
		for r := range snap {
			in.skip[r] = true
		}
		for i := range in.pending {
			in.pending[i] = "0"
		}
		return nil
	}
	var orphans []ref
	for _, k := range in.keys {
		vals, err := in.client.LRange(ctx, in.proc(k), 0, -1).Result()
		if err != nil {
			return err
		}
		for _, v := range vals {
			r := ref{key: k, val: v}
			if snap[r] > 0 {
				snap[r]--
				continue
			}
			orphans = append(orphans, r)
		}
	}
	if len(orphans) > 0 {
		in.log.Warn("found elements moved by a read whose reply was lost; delivering them", "elements", len(orphans))
	}
	in.orphans = orphans
	return nil
}

// readList moves up to batchSize elements of one list into its processing
// list; an empty batch means nothing arrived within pollBlock.
func (in *Input) readList(ctx context.Context) (held, error) {
	if len(in.orphans) > 0 {
		k := min(len(in.orphans), in.batchSize)
		h := listHeld(in.orphans[:k])
		in.orphans = in.orphans[k:]
		return h, nil
	}
	n := len(in.keys)
	var key, first string
	for i := 0; i < n && key == ""; i++ {
		k := in.keys[(in.rr+i)%n]
		v, err := in.client.LMove(ctx, k, in.proc(k), "LEFT", "RIGHT").Result()
		if err == goredis.Nil {
			continue
		}
		if err != nil {
			return held{}, err
		}
		key, first = k, v
	}
	if key == "" {
		k := in.keys[in.rr%n]
		// BLMOVE's timeout has a granularity of a second in go-redis.
		v, err := in.client.BLMove(ctx, k, in.proc(k), "LEFT", "RIGHT", time.Second).Result()
		if err == goredis.Nil {
			in.rr++
			return held{}, nil
		}
		if err != nil {
			return held{}, err
		}
		key, first = k, v
	}
	in.rr++
	vals := []string{first}
	if in.batchSize > 1 {
		p := in.client.Pipeline()
		cmds := make([]*goredis.StringCmd, in.batchSize-1)
		for i := range cmds {
			cmds[i] = p.LMove(ctx, key, in.proc(key), "LEFT", "RIGHT")
		}
		_, _ = p.Exec(ctx)
		for _, c := range cmds {
			v, err := c.Result()
			if err != nil {
				// goredis.Nil: the list is empty. Another error may have
				// lost the reply of a move that happened: look for it.
				if err != goredis.Nil {
					in.dirty = true
				}
				break
			}
			vals = append(vals, v)
		}
	}
	refs := make([]ref, len(vals))
	for i, v := range vals {
		refs[i] = ref{key: key, val: v}
	}
	return listHeld(refs), nil
}

// listHeld makes the messages of list elements.
func listHeld(refs []ref) held {
	h := held{batch: message.Batch{Messages: make([]message.Message, len(refs))}, refs: slices.Clone(refs)}
	for i, r := range refs {
		m := message.New([]byte(r.val))
		m.Meta.Source = r.key
		m.SetMeta(MetaKey, r.key)
		h.batch.Messages[i] = m
	}
	return h
}

// readSubscribe waits for one published message, then takes what else
// is buffered up to batchSize. Pub/sub keeps nothing to acknowledge.
func (in *Input) readSubscribe(ctx context.Context) (message.Batch, message.AckFunc, error) {
	var b message.Batch
	add := func(pm *goredis.Message) {
		m := message.New([]byte(pm.Payload))
		m.Meta.Source = pm.Channel
		m.SetMeta(MetaKey, pm.Channel)
		if pm.Pattern != "" {
			m.SetMeta(MetaPattern, pm.Pattern)
		}
		b.Messages = append(b.Messages, m)
	}
	select {
	case <-ctx.Done():
		return b, nil, ctx.Err()
	case pm, ok := <-in.ch:
		if !ok {
			return b, nil, errors.New("redis input: subscription closed")
		}
		add(pm)
	}
	for b.Len() < in.batchSize {
		select {
		case pm, ok := <-in.ch:
			if !ok {
				return b, message.NoopAck, nil
			}
			add(pm)
		default:
			return b, message.NoopAck, nil
		}
	}
	return b, message.NoopAck, nil
}

// readStreams reads this consumer's pending entries first (after
// Connect), then claims stale entries every claim interval, then reads new
// entries; an empty batch means nothing arrived within pollBlock.
func (in *Input) readStreams(ctx context.Context) (held, error) {
	for i, id := range in.pending {
		if id == "" {
			continue
		}
		res, err := in.client.XReadGroup(ctx, &goredis.XReadGroupArgs{
			Group: in.group, Consumer: in.consumer, Streams: []string{in.keys[i], id},
			Count: int64(in.batchSize), Block: -1,
		}).Result()
		if err != nil && err != goredis.Nil {
			return held{}, err
		}
		if len(res) == 0 || len(res[0].Messages) == 0 {
			in.pending[i] = ""
			continue
		}
		msgs := res[0].Messages
		in.pending[i] = msgs[len(msgs)-1].ID
		msgs = slices.DeleteFunc(msgs, func(x goredis.XMessage) bool { return in.skip[ref{key: in.keys[i], val: x.ID}] })
		return in.entries(ctx, in.keys[i], msgs)
	}
	in.skip = nil
	if in.claimIdle > 0 && time.Since(in.lastClaim) >= in.claimIdle/2 {
		h, err := in.claim(ctx)
		if err != nil || h.batch.Len() > 0 {
			return h, err
		}
	}
	var (
		res []goredis.XStream
		err error
	)
	if in.conn.cluster != nil && len(in.keys) > 1 {
		res, err = in.readEach(ctx)
	} else {
		streams := make([]string, 0, 2*len(in.keys))
		streams = append(streams, in.keys...)
		for range in.keys {
			streams = append(streams, ">")
		}
		res, err = in.client.XReadGroup(ctx, &goredis.XReadGroupArgs{
			Group: in.group, Consumer: in.consumer, Streams: streams,
			Count: int64(in.batchSize), Block: pollBlock,
		}).Result()
	}
	if err == goredis.Nil {
		return held{}, nil
	}
	if err != nil {
		return held{}, err
	}
	var h held
	for _, s := range res {
		hs, err := in.entries(ctx, s.Stream, s.Messages)
		if err != nil {
			return held{}, err
		}
		h.batch.Messages = append(h.batch.Messages, hs.batch.Messages...)
		h.refs = append(h.refs, hs.refs...)
	}
	return h, nil
}

// readEach reads streams one at a time, for a cluster, where one
// XREADGROUP cannot name streams in different hash slots: each without
// waiting, then waiting on one of them in turn.
func (in *Input) readEach(ctx context.Context) ([]goredis.XStream, error) {
	n := len(in.keys)
	for i := range n + 1 {
		k := in.keys[(in.rr+i)%n]
		block := time.Duration(-1)
		if i == n {
			block = pollBlock
		}
		res, err := in.client.XReadGroup(ctx, &goredis.XReadGroupArgs{
			Group: in.group, Consumer: in.consumer, Streams: []string{k, ">"},
			Count: int64(in.batchSize), Block: block,
		}).Result()
		if err == goredis.Nil {
			continue
		}
		if err != nil || len(res) > 0 && len(res[0].Messages) > 0 {
			in.rr++
			return res, err
		}
	}
	in.rr++
	return nil, goredis.Nil
}

// claim takes over entries pending longer than claimIdle, one page per
// stream per call, continuing from where the last call stopped.
func (in *Input) claim(ctx context.Context) (held, error) {
	for _, k := range in.keys {
		start := cmpOr(in.claimNext[k], "0-0")
		msgs, next, err := in.client.XAutoClaim(ctx, &goredis.XAutoClaimArgs{
			Stream: k, Group: in.group, Consumer: in.consumer, MinIdle: in.claimIdle,
			Start: start, Count: int64(in.batchSize),
		}).Result()
		if err != nil {
			return held{}, fmt.Errorf("xautoclaim %q: %w", k, err)
		}
		in.claimNext[k] = next
		if next == "0-0" || next == "" {
			delete(in.claimNext, k)
		}
		if len(msgs) > 0 {
			in.log.Info("claimed stale pending entries", "stream", k, "entries", len(msgs))
			return in.entries(ctx, k, msgs)
		}
	}
	in.lastClaim = time.Now()
	return held{}, nil
}

// entries turns stream entries into messages. Entries deleted while
// pending (no fields) are acknowledged and skipped.
func (in *Input) entries(ctx context.Context, stream string, msgs []goredis.XMessage) (held, error) {
	var (
		h    held
		gone []string
	)
	for _, x := range msgs {
		if x.Values == nil {
			gone = append(gone, x.ID)
			continue
		}
		h.batch.Messages = append(h.batch.Messages, in.entry(stream, x))
		h.refs = append(h.refs, ref{key: stream, val: x.ID})
	}
	if len(gone) > 0 {
		if err := in.client.XAck(ctx, stream, in.group, gone...).Err(); err != nil {
			return held{}, fmt.Errorf("xack deleted entries of %q: %w", stream, err)
		}
	}
	return h, nil
}

func (in *Input) entry(stream string, x goredis.XMessage) message.Message {
	var m message.Message
	if v, ok := x.Values[in.field]; ok {
		m = message.New([]byte(fmt.Sprint(v)))
		for k, v := range x.Values {
			if k != in.field && k != MetaKey && k != MetaStreamID {
				m.SetMeta(k, fmt.Sprint(v))
			}
		}
	} else {
		obj := make(map[string]any, len(x.Values))
		for k, v := range x.Values {
			obj[k] = fmt.Sprint(v)
		}
		m = message.NewStructured(obj)
	}
	m.Meta.Source = stream
	m.SetMeta(MetaKey, stream)
	m.SetMeta(MetaStreamID, x.ID)
	if ms, _, ok := strings.Cut(x.ID, "-"); ok {
		if n, err := strconv.ParseInt(ms, 10, 64); err == nil {
			m.Meta.Timestamp = time.UnixMilli(n)
		}
	}
	return m
}

// ackFor returns the AckFunc of h: nil removes its elements from the
// processing lists (XACKs its entries), retried by later Reads while the
// server does not answer; an error hands the batch out again.
func (in *Input) ackFor(h held) message.AckFunc {
	h.batch = message.Batch{Messages: slices.Clone(h.batch.Messages)}
	return func(ctx context.Context, err error) error {
		if err != nil {
			in.log.Warn("batch failed; redelivering it", "messages", h.batch.Len(), "error", err)
			in.mu.Lock()
			in.redo = append(in.redo, h)
			in.mu.Unlock()
			return nil
		}
		if err := in.settle(ctx, h.refs); err != nil {
			in.log.Warn("acknowledgement not recorded in Redis; retrying it with the next read",
				"messages", len(h.refs), "error", err)
			in.mu.Lock()
			in.unacked = append(in.unacked, h.refs...)
			in.mu.Unlock()
			return nil
		}
		in.untrack(h.refs)
		return nil
	}
}

// settle removes refs from their processing lists (list) or XACKs them
// (streams) in one pipeline.
func (in *Input) settle(ctx context.Context, refs []ref) error {
	if len(refs) == 0 || in.client == nil {
		return nil
	}
	p := in.client.Pipeline()
	switch in.kind {
	case typeList:
		for _, r := range refs {
			p.LRem(ctx, in.proc(r.key), 1, r.val)
		}
	case typeStreams:
		byKey := map[string][]string{}
		for _, r := range refs {
			byKey[r.key] = append(byKey[r.key], r.val)
		}
		for k, ids := range byKey {
			p.XAck(ctx, k, in.group, ids...)
		}
	}
	_, err := p.Exec(ctx)
	return err
}

// retryAcks records acknowledgements that failed earlier.
func (in *Input) retryAcks(ctx context.Context) {
	in.mu.Lock()
	refs := in.unacked
	in.unacked = nil
	in.mu.Unlock()
	if len(refs) == 0 {
		return
	}
	if err := in.settle(ctx, refs); err != nil {
		in.mu.Lock()
		in.unacked = append(in.unacked, refs...)
		in.mu.Unlock()
		return
	}
	in.untrack(refs)
}

// untrack forgets refs whose acknowledgement Redis recorded.
func (in *Input) untrack(refs []ref) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, r := range refs {
		if in.inflight[r] <= 1 {
			delete(in.inflight, r)
		} else {
			in.inflight[r]--
		}
	}
}

func (in *Input) nextRedo() (held, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.redo) == 0 {
		return held{}, false
	}
	h := in.redo[0]
	in.redo = in.redo[1:]
	return h, true
}

func (in *Input) closeClient() {
	if in.pubsub != nil {
		_ = in.pubsub.Close()
		in.pubsub = nil
	}
	if in.client != nil {
		_ = in.client.Close()
		in.client = nil
	}
}

// Close records acknowledgements still owed, then disconnects. Elements
// and entries not acknowledged stay in their processing lists or pending
// lists for the next start.
func (in *Input) Close(ctx context.Context) error {
	if in.client != nil {
		in.retryAcks(ctx)
	}
	in.closeClient()
	return nil
}
