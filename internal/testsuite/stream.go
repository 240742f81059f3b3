package testsuite

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/stream"
)

// runStream runs a stream case: the stream's processors (or one of them)
// as a node builds them, between a finite in-memory input and collecting
// outputs.
func runStream(ctx context.Context, reg *component.Registry, cfg *config.Config, c Case) ([]string, error) {
	idx, err := streamIndex(cfg, c)
	if err != nil {
		return nil, err
	}
	s := cfg.Streams[idx]
	prefix := fmt.Sprintf("streams[%d]", idx)
	parts, ps := engine.BuildStreamParts(reg, prefix, s, component.Resources{StreamID: s.ID})
	if len(ps) > 0 {
		return nil, problemsError(ps)
	}
	procs := parts.Processors
	if c.Processor != nil {
		i := *c.Processor
		if i >= len(s.Pipeline.Processors) {
			parts.Close(ctx)
			return nil, fmt.Errorf("%s.processor: stream %q has %d processors", c.Path, s.ID, len(s.Pipeline.Processors))
		}
		// The built list holds the input codec's decoder besides the
		// configured processors (engine.BuildStreamParts).
		if len(procs) > len(s.Pipeline.Processors) {
			at := 0
			if _, ok := procs[0].(component.Batcher); ok {
				at = 1
			}
			if i >= at {
				i++
			}
		}
		procs = []component.Processor{procs[i]}
		for j, p := range parts.Processors {
			if p != procs[0] {
				_ = parts.Processors[j].Close(ctx)
			}
		}
	}
	out, errOut := &collector{}, &collector{}
	var output component.Output = out
	if c.Processor == nil {
		// A test sees what the output would write: encoded by its codec.
		if _, codec, err := reg.SplitCodec(component.KindOutput, s.Output.Type, s.Output.Fields, component.Resources{}); err == nil && codec != nil {
			output = component.EncodingOutput(out, codec)
		}
	}
	temps := parts.Temporaries
	buffer := parts.Buffer
	if c.Processor != nil {
		if buffer != nil {
			_ = buffer.Close(ctx)
		}
		buffer = nil
	}
	parts.Processors, parts.Temporaries, parts.Buffer = nil, nil, nil
	parts.Close(ctx) // the configured input and outputs: the harness replaces them
	st, err := stream.New(stream.Config{
		ID:                 s.ID,
		Input:              newFeed(c),
		Buffer:             buffer,
		Processors:         procs,
		ThreadNum:          s.Pipeline.ThreadNum,
		Output:             output,
		ErrorOutput:        errOut,
		Temporaries:        temps,
		MaxConnectAttempts: 1,
	})
	if err != nil {
		return nil, err
	}
	if err := st.Run(ctx); err != nil {
		return nil, fmt.Errorf("stream %q: %w", s.ID, err)
	}
	if status := st.Status(); status.State != stream.StateCompleted {
		return nil, fmt.Errorf("stream %q ended %s: %s", s.ID, status.State, status.LastError)
	}
	var fails []string
	if c.Expect != nil {
		fails = append(fails, compareOrdered("output", c.Expect, out.got())...)
	}
	if c.ExpectErrors != nil {
		fails = append(fails, compareOrdered("error_output", c.ExpectErrors, errOut.got())...)
	} else if got := errOut.got(); len(got) > 0 {
		fails = append(fails, fmt.Sprintf("error_output: %d messages, none expected (add expect_errors):\n%s", len(got), listGot(got)))
	}
	return fails, nil
}

// streamIndex finds the stream a case names, or the only one.
func streamIndex(cfg *config.Config, c Case) (int, error) {
	if c.Stream == "" {
		if len(cfg.Streams) == 1 {
			return 0, nil
		}
		return 0, fmt.Errorf("%s: the configuration has %d streams: name one with stream", c.Path, len(cfg.Streams))
	}
	var ids []string
	for i, s := range cfg.Streams {
		if s.ID == c.Stream {
			return i, nil
		}
		ids = append(ids, s.ID)
	}
	msg := fmt.Sprintf("%s.stream: no stream %q in the configuration", c.Path, c.Stream)
	if s := component.Suggest(c.Stream, ids); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return 0, errors.New(msg)
}

// feed is the in-memory input of a stream case: the case's messages in
// batches of BatchSize (all in one batch when 0), then the end of input.
type feed struct {
	mu      sync.Mutex // guards batches
	batches []message.Batch
}

func newFeed(c Case) *feed {
	size := c.BatchSize
	if size == 0 {
		size = len(c.Input)
	}
	f := &feed{}
	for i := 0; i < len(c.Input); i += size {
		var b message.Batch
		for _, in := range c.Input[i:min(i+size, len(c.Input))] {
			m := message.New(append([]byte(nil), in.Payload...))
			m.Meta.Source = "test"
			if in.Key != "" {
				m.Meta.Key = []byte(in.Key)
			}
			for k, v := range in.Metadata {
				m.SetMeta(k, v)
			}
			b.Messages = append(b.Messages, m)
		}
		f.batches = append(f.batches, b)
	}
	return f
}

func (f *feed) Connect(context.Context) error { return nil }
func (f *feed) Close(context.Context) error   { return nil }
func (f *feed) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if err := ctx.Err(); err != nil {
		return message.Batch{}, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.batches) == 0 {
		return message.Batch{}, nil, message.ErrEndOfInput
	}
	b := f.batches[0]
	f.batches = f.batches[1:]
	return b, message.NoopAck, nil
}

// collector is an output that keeps what it is given, in order.
type collector struct {
	mu   sync.Mutex // guards msgs
	msgs []Got
}

func (c *collector) Connect(context.Context) error { return nil }
func (c *collector) Close(context.Context) error   { return nil }
func (c *collector) Write(_ context.Context, b message.Batch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range b.Messages {
		c.msgs = append(c.msgs, gotOf(&b.Messages[i]))
	}
	return nil
}

func (c *collector) got() []Got {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Got(nil), c.msgs...)
}

var (
	_ component.Input  = (*feed)(nil)
	_ component.Output = (*collector)(nil)
)

func problemsError(ps []config.Problem) error {
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errors.Join(errs...)
}
