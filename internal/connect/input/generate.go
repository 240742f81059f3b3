package input

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
			"In `context`, `{{count}}` becomes the 1-based sequence number of the message and " +
			"`{{random}}` a random integer in [0, 1000000).",
		Schema: component.ObjectSchema(map[string]any{
			"context": component.Prop("string", "Payload of every message, usually JSON. `{{count}}` is replaced by the "+
				"1-based sequence number of the message and `{{random}}` by a random integer in [0, 1000000); "+
				"any other text is kept as is.", nil),
			"interval": component.DurationProp("Pause between batches; \"0s\" emits as fast as possible.", "1s"),
			"count": func() map[string]any {
				p := component.Prop("integer", "Total number of messages, after which the input ends; 0 means unlimited.", 0)
				p["minimum"] = 0
				return p
			}(),
			"batch_size": batchSizeProp(),
		}, "context"),
		Example: `type: generate
context: '{"id": {{count}}, "v": {{random}}}'
interval: 10ms
count: 5
batch_size: 1
`,
	}, NewGenerate)
}

var _ component.Input = (*Generate)(nil)

// GenerateConfig is the configuration of the generate input.
type GenerateConfig struct {
	Context   string `json:"context"`
	Interval  string `json:"interval"`
	Count     int64  `json:"count"`
	BatchSize int    `json:"batch_size"`
}

// Generate emits the same templated payload over and over. It is on the
// throughput hot path: a batch costs one allocation for its messages and,
// when the template has placeholders, one for all of their payloads.
type Generate struct {
	tmpl      template
	interval  time.Duration
	count     int64 // 0 = unlimited
	batchSize int

	// Owned by the goroutine that calls Read.
	emitted int64
	next    time.Time // earliest time of the next batch
	timer   *time.Timer
	rng     *rand.Rand
}

// NewGenerate builds a generate input from its configuration.
func NewGenerate(conf map[string]any, _ component.Resources) (component.Input, error) {
	c := GenerateConfig{Interval: "1s", BatchSize: 1}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	var errs []error
	if c.Context == "" {
		errs = append(errs, errors.New("context: required"))
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
	return &Generate{
		tmpl:      parseTemplate(c.Context),
		interval:  iv,
		count:     c.Count,
		batchSize: c.BatchSize,
		rng:       rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}, nil
}

// Connect does nothing: there is nothing to reach.
func (g *Generate) Connect(context.Context) error { return nil }

// Read returns the next batch, waiting for the interval first, or
// message.ErrEndOfInput once count messages were emitted.
func (g *Generate) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	n := int64(g.batchSize)
	if g.count > 0 {
		if left := g.count - g.emitted; left <= 0 {
			return message.Batch{}, nil, message.ErrEndOfInput
		} else if left < n {
			n = left
		}
	}
	if err := g.wait(ctx); err != nil {
		return message.Batch{}, nil, err
	}
	msgs := make([]message.Message, n)
	if g.tmpl.static != nil {
		for i := range msgs {
			msgs[i] = message.New(g.tmpl.static)
		}
	} else {
		buf := make([]byte, 0, int(n)*g.tmpl.maxLen)
		for i := range msgs {
			start := len(buf)
			buf = g.tmpl.expand(buf, g.emitted+int64(i)+1, g.rng)
			msgs[i] = message.New(buf[start:len(buf):len(buf)])
		}
	}
	g.emitted += n
	if g.interval > 0 {
		g.next = time.Now().Add(g.interval)
	}
	return message.Batch{Messages: msgs}, message.NoopAck, nil
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
	phCount  = "{{count}}"
	phRandom = "{{random}}"
)

const (
	randomBound    = 1_000_000
	maxCountDigits = 19 // a positive int64
	maxRandDigits  = 6  // < randomBound
)

type placeholder uint8

const (
	noPlaceholder placeholder = iota
	countPlaceholder
	randomPlaceholder
)

// part is literal text followed by at most one placeholder.
type part struct {
	lit []byte
	ph  placeholder
}

// template is a parsed generate context. static is the whole payload when
// there are no placeholders, shared by every message.
type template struct {
	static []byte
	parts  []part
	maxLen int // upper bound of one expansion
}

func parseTemplate(s string) template {
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
			t.parts = append(t.parts, part{lit: lit, ph: randomPlaceholder})
			t.maxLen += len(lit) + maxRandDigits
			lit, src = nil, rest[len(phRandom):]
		default: // not a placeholder: keep one "{" and look again after it
			lit, src = append(lit, '{'), rest[1:]
		}
	}
	if len(t.parts) == 0 {
		return template{static: []byte(s)}
	}
	if len(lit) > 0 {
		t.parts = append(t.parts, part{lit: lit})
		t.maxLen += len(lit)
	}
	return t
}

// expand appends one payload to buf.
func (t *template) expand(buf []byte, seq int64, rng *rand.Rand) []byte {
	for _, p := range t.parts {
		buf = append(buf, p.lit...)
		switch p.ph {
		case countPlaceholder:
			buf = strconv.AppendInt(buf, seq, 10)
		case randomPlaceholder:
			buf = strconv.AppendInt(buf, int64(rng.IntN(randomBound)), 10)
		}
	}
	return buf
}
