package input

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterInput(component.Spec{
		Name: "generate",
		Summary: "Emits a templated payload at a fixed interval, optionally a fixed number of times. " +
			"In `context`, `{{count}}` becomes the 1-based sequence number of the message, `{{random}}` a " +
			"random integer in [0, 1000000), `{{random:N}}` one in [0, N) and `{{timestamp_ms}}` " +
			"`timestamp_start_ms + floor((count-1) * timestamp_step_ms)`. With `seed` the random values are a " +
			"function of the seed and the sequence number, so every run emits the same payloads. " +
			"In a job it can run at any parallelism (subtask i of n emits the sequence numbers s with " +
			"(s-1) mod n = i, `count` staying the total) and resumes from its checkpointed position, also at " +
			"another parallelism (the sequence numbers the old subtasks left are dealt to the new ones); " +
			"with `seed` (or no random placeholder) a replay emits exactly the same messages.",
		Schema: component.ObjectSchema(map[string]any{
			"context": component.Prop("string", "Payload of every message, usually JSON. `{{count}}` is replaced by the "+
				"1-based sequence number of the message, `{{random}}` by a random integer in [0, 1000000), "+
				"`{{random:N}}` (N a positive integer) by one in [0, N) and `{{timestamp_ms}}` by "+
				"`timestamp_start_ms + floor((count-1) * timestamp_step_ms)`; any other text is kept as is.", nil),
			"interval": component.DurationProp("Pause between batches; \"0s\" emits as fast as possible.", "1s"),
			"count": func() map[string]any {
				p := component.Prop("integer", "Total number of messages, after which the input ends; 0 means unlimited.", 0)
				p["minimum"] = 0
				return p
			}(),
			"batch_size": batchSizeProp(),
			"seed": component.Prop("integer", "When set, `{{random}}` and `{{random:N}}` are a pure function of the "+
				"seed, the sequence number and the placeholder's place in `context`, so replays and split runs "+
				"produce identical payloads; when absent they are random.", nil),
			"timestamp_start_ms": component.Prop("integer", "`{{timestamp_ms}}` of the first message, in "+
				"milliseconds since the Unix epoch (the default 0 is 1970-01-01T00:00:00Z).", 0),
			"timestamp_step_ms": component.Prop("number", "Milliseconds `{{timestamp_ms}}` advances per message; "+
				"a fraction puts several messages in one millisecond (`{{timestamp_ms}}` is `timestamp_start_ms + floor((count-1) * timestamp_step_ms)`).", 1),
		}, "context"),
		Example: `type: generate
context: '{"id": {{count}}, "v": {{random}}, "k": {{random:10}}, "ts": {{timestamp_ms}}}'
interval: 10ms
count: 5
batch_size: 1
seed: 42
timestamp_start_ms: 1700000000000
timestamp_step_ms: 100
`,
	}, NewGenerate)
}

var (
	_ component.Rescalable = (*Generate)(nil)
	_ component.Sampler    = (*Generate)(nil)
)

// GenerateConfig is the configuration of the generate input.
type GenerateConfig struct {
	Context          string  `json:"context"`
	Interval         string  `json:"interval"`
	Count            int64   `json:"count"`
	BatchSize        int     `json:"batch_size"`
	Seed             *int64  `json:"seed"`
	TimestampStartMs int64   `json:"timestamp_start_ms"`
	TimestampStepMs  float64 `json:"timestamp_step_ms"`
}

// Generate emits the same templated payload over and over. It is on the
// throughput hot path: a batch costs one allocation for its messages and,
// when the template has placeholders, one for all of their payloads.
//
// Its position is a share of the sequence numbers: Split makes it emit
// every subtasks-th one, and a rescale adds the catch-up lanes the old
// subtasks left.
type Generate struct {
	tmpl      template
	interval  time.Duration
	count     int64 // 0 = unlimited; the total over all subtasks
	batchSize int

	// Owned by the goroutine that calls Read.
	seqs    share
	emitted int64 // messages of this instance, for people reading a position
	scratch []int64
	next    time.Time // earliest time of the next batch
	timer   *time.Timer
	rng     *rand.Rand
}

// NewGenerate builds a generate input from its configuration.
func NewGenerate(conf map[string]any, _ component.Resources) (component.Input, error) {
	c := GenerateConfig{Interval: "1s", BatchSize: 1, TimestampStepMs: 1}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	var errs []error
	if c.Context == "" {
		errs = append(errs, errors.New("context: required"))
	}
	tmpl, err := parseTemplate(c.Context)
	if err != nil {
		errs = append(errs, fmt.Errorf("context: %w", err))
	}
	iv, err := parseDuration("interval", c.Interval)
	if err != nil {
		errs = append(errs, err)
	}
	if c.Count < 0 {
		errs = append(errs, fmt.Errorf("count: must not be negative, got %d", c.Count))
	}
	if err := checkBatchSize(c.BatchSize); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	tmpl.tsStart, tmpl.tsStep = c.TimestampStartMs, c.TimestampStepMs
	if c.Seed != nil {
		tmpl.seeded, tmpl.seed = true, uint64(*c.Seed)
	}
	return &Generate{
		tmpl:      tmpl,
		interval:  iv,
		count:     c.Count,
		batchSize: c.BatchSize,
		seqs:      newShare(1, limitOf(c.Count)),
		rng:       rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}, nil
}

// limitOf is the exclusive end of the sequence numbers of count messages.
func limitOf(count int64) int64 {
	if count == 0 {
		return -1 // unlimited
	}
	return count + 1
}

// Split makes this instance emit the sequence numbers s with
// (s-1) mod subtasks == subtask.
func (g *Generate) Split(subtask, subtasks int) error {
	if err := g.seqs.split(subtask, subtasks); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	return nil
}

// generatePosition is the checkpointed position of a generate input.
type generatePosition struct {
	// Emitted is how many messages this instance emitted, for people
	// reading a checkpoint (and, without Next, the position of an older
	// version).
	Emitted int64 `json:"emitted"`
	// Next is the sequence number of its next message after the catch-up
	// lanes.
	Next int64 `json:"next,omitempty"`
	// CatchUp are the sequence numbers a rescale gave this instance
	// besides its own, emitted first.
	CatchUp []lane `json:"catch_up,omitempty"`
}

// Position returns the instance's next sequence number and catch-up lanes.
func (g *Generate) Position() ([]byte, error) {
	return json.Marshal(generatePosition{Emitted: g.emitted, Next: g.seqs.next, CatchUp: g.seqs.catchUp})
}

func parseGeneratePosition(pos []byte) (generatePosition, error) {
	var p generatePosition
	if err := json.Unmarshal(pos, &p); err != nil {
		return p, fmt.Errorf("generate: position %s: %w", pos, err)
	}
	if p.Emitted < 0 || p.Next < 0 {
		return p, fmt.Errorf("generate: position %s: emitted and next must not be negative", pos)
	}
	return p, nil
}

// Seek continues after the messages a Position counted.
func (g *Generate) Seek(_ context.Context, pos []byte) error {
	p, err := parseGeneratePosition(pos)
	if err != nil {
		return err
	}
	next := p.Next
	if next == 0 {
		next = 1 + g.seqs.subtask() + p.Emitted*g.seqs.stride
	}
	if err := g.seqs.seek(next, p.CatchUp); err != nil {
		return fmt.Errorf("generate: position %s: %w", pos, err)
	}
	g.emitted = p.Emitted
	return nil
}

// Rescale deals out the sequence numbers the old subtasks left.
func (g *Generate) Rescale(old [][]byte) ([]byte, error) {
	mains := make([]int64, len(old))
	var lanes []lane
	for i, raw := range old {
		mains[i] = 1 + int64(i)
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		p, err := parseGeneratePosition(raw)
		if err != nil {
			return nil, err
		}
		if p.Next > 0 {
			mains[i] = p.Next
		} else {
			mains[i] += p.Emitted * int64(len(old))
		}
		lanes = append(lanes, p.CatchUp...)
	}
	s := g.seqs
	if err := s.rescale(mains, lanes, int(s.subtask()), int(s.stride)); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	return json.Marshal(generatePosition{Next: s.next, CatchUp: s.catchUp})
}

// Sample is the first message, decoded, when the context is JSON: every
// message has its shape, the placeholders being numbers.
func (g *Generate) Sample() (any, bool) {
	p := g.tmpl.static
	if p == nil {
		p = g.tmpl.expand(nil, 1, rand.New(rand.NewPCG(0, 0)))
	}
	var v any
	if json.Unmarshal(p, &v) != nil {
		return nil, false
	}
	return v, true
}

// Connect does nothing: there is nothing to reach.
func (g *Generate) Connect(context.Context) error { return nil }

// Read returns the next batch, waiting for the interval first, or
// message.ErrEndOfInput once count messages were emitted.
func (g *Generate) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if g.seqs.ended() {
		return message.Batch{}, nil, message.ErrEndOfInput
	}
	if err := g.wait(ctx); err != nil {
		return message.Batch{}, nil, err
	}
	if len(g.seqs.catchUp) > 0 {
		g.scratch = g.seqs.takeCatchUp(g.scratch[:0], g.batchSize)
		msgs := make([]message.Message, len(g.scratch))
		for i, seq := range g.scratch {
			if g.tmpl.static != nil {
				msgs[i] = message.New(g.tmpl.static)
			} else {
				msgs[i] = message.New(g.tmpl.expand(nil, seq, g.rng))
			}
		}
		g.emitted += int64(len(msgs))
		g.paced()
		return message.Batch{Messages: msgs}, message.NoopAck, nil
	}
	n := int64(g.batchSize)
	if left := g.seqs.mainLeft(); left >= 0 && left < n {
		n = left
	}
	msgs := make([]message.Message, n)
	if g.tmpl.static != nil {
		for i := range msgs {
			msgs[i] = message.New(g.tmpl.static)
		}
	} else {
		buf := make([]byte, 0, int(n)*g.tmpl.maxLen)
		seq := g.seqs.next
		for i := range msgs {
			start := len(buf)
			buf = g.tmpl.expand(buf, seq, g.rng)
			seq += g.seqs.stride
			msgs[i] = message.New(buf[start:len(buf):len(buf)])
		}
	}
	g.seqs.next += n * g.seqs.stride
	g.emitted += n
	g.paced()
	return message.Batch{Messages: msgs}, message.NoopAck, nil
}

// paced sets when the next batch is due.
func (g *Generate) paced() {
	if g.interval > 0 {
		g.next = time.Now().Add(g.interval)
	}
}

// wait blocks until the next batch is due or ctx ends.
func (g *Generate) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if g.interval <= 0 || g.next.IsZero() {
		return nil
	}
	d := time.Until(g.next)
	if d <= 0 {
		return nil
	}
	if g.timer == nil {
		g.timer = time.NewTimer(d)
	} else {
		g.timer.Reset(d)
	}
	select {
	case <-g.timer.C:
		return nil
	case <-ctx.Done():
		g.timer.Stop()
		return ctx.Err()
	}
}

// Close stops the interval timer.
func (g *Generate) Close(context.Context) error {
	if g.timer != nil {
		g.timer.Stop()
	}
	return nil
}

// Placeholders of the generate template. They deliberately do not start with
// "${", which the configuration loader reserves for secret references.
const (
	phCount     = "{{count}}"
	phRandom    = "{{random}}"
	phRandomN   = "{{random:" // followed by N and "}}"
	phTimestamp = "{{timestamp_ms}}"
)

const (
	randomBound    = 1_000_000
	maxCountDigits = 19 // a positive int64
	maxInt64Digits = 20 // any int64, sign included
)

type placeholder uint8

const (
	noPlaceholder placeholder = iota
	countPlaceholder
	randomPlaceholder
	timestampPlaceholder
)

// part is literal text followed by at most one placeholder. bound is the
// exclusive upper bound of a random placeholder.
type part struct {
	lit   []byte
	ph    placeholder
	bound uint64
}

// template is a parsed generate context. static is the whole payload when
// there are no placeholders, shared by every message.
type template struct {
	static []byte
	parts  []part
	maxLen int // upper bound of one expansion

	seeded bool // random placeholders are a function of seed and seq
	seed   uint64
	// {{timestamp_ms}} of sequence number s is tsStart + floor((s-1)*tsStep).
	tsStart int64
	tsStep  float64
}

// parseTemplate parses a generate context; only a malformed {{random:N}}
// is an error, any other text is kept as is.
func parseTemplate(s string) (template, error) {
	var t template
	var lit []byte
	src := []byte(s)
	for {
		i := bytes.Index(src, []byte("{{"))
		if i < 0 {
			lit = append(lit, src...)
			break
		}
		lit = append(lit, src[:i]...)
		rest := src[i:]
		switch {
		case bytes.HasPrefix(rest, []byte(phCount)):
			t.parts = append(t.parts, part{lit: lit, ph: countPlaceholder})
			t.maxLen += len(lit) + maxCountDigits
			lit, src = nil, rest[len(phCount):]
		case bytes.HasPrefix(rest, []byte(phRandom)):
			t.parts = append(t.parts, part{lit: lit, ph: randomPlaceholder, bound: randomBound})
			t.maxLen += len(lit) + digits(randomBound-1)
			lit, src = nil, rest[len(phRandom):]
		case bytes.HasPrefix(rest, []byte(phRandomN)):
			end := bytes.Index(rest, []byte("}}"))
			if end < 0 {
				return template{}, fmt.Errorf("%q is not closed by \"}}\"", rest)
			}
			arg := string(rest[len(phRandomN):end])
			n, err := strconv.ParseUint(arg, 10, 63)
			if err != nil || n == 0 {
				return template{}, fmt.Errorf("%s: N must be a positive integer", rest[:end+2])
			}
			t.parts = append(t.parts, part{lit: lit, ph: randomPlaceholder, bound: n})
			t.maxLen += len(lit) + digits(n-1)
			lit, src = nil, rest[end+2:]
		case bytes.HasPrefix(rest, []byte(phTimestamp)):
			t.parts = append(t.parts, part{lit: lit, ph: timestampPlaceholder})
			t.maxLen += len(lit) + maxInt64Digits
			lit, src = nil, rest[len(phTimestamp):]
		default: // not a placeholder: keep one "{" and look again after it
			lit, src = append(lit, '{'), rest[1:]
		}
	}
	if len(t.parts) == 0 {
		return template{static: []byte(s)}, nil
	}
	if len(lit) > 0 {
		t.parts = append(t.parts, part{lit: lit})
		t.maxLen += len(lit)
	}
	return t, nil
}

// digits is the number of decimal digits of n.
func digits(n uint64) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// expand appends one payload to buf. Without a seed, random placeholders
// draw from rng.
func (t *template) expand(buf []byte, seq int64, rng *rand.Rand) []byte {
	for i, p := range t.parts {
		buf = append(buf, p.lit...)
		switch p.ph {
		case countPlaceholder:
			buf = strconv.AppendInt(buf, seq, 10)
		case randomPlaceholder:
			var v uint64
			if t.seeded {
				v = seededRandom(t.seed, uint64(seq), uint64(i), p.bound)
			} else {
				v = rng.Uint64N(p.bound)
			}
			buf = strconv.AppendUint(buf, v, 10)
		case timestampPlaceholder:
			buf = strconv.AppendInt(buf, t.tsStart+int64(math.Floor(float64(seq-1)*t.tsStep)), 10)
		}
	}
	return buf
}

// seededRandom is a value in [0, bound) that depends only on its arguments:
// splitmix64 finalizers of the seed, the sequence number and the index of
// the placeholder, scaled by a multiply-high.
func seededRandom(seed, seq, index, bound uint64) uint64 {
	x := splitmix64(seed ^ splitmix64(seq*0x9e3779b97f4a7c15+index))
	hi, _ := bits.Mul64(x, bound)
	return hi
}

// splitmix64 is the finalizer of the SplitMix64 generator (Steele, Lea and
// Flood), a good 64-bit mixing function.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
