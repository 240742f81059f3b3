package output

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterOutput(component.Spec{
		Name: "stdout",
		Summary: "Writes each message payload to standard output, flushed after every batch. At-least-once in a " +
			"job: after a restore, what was written since the last completed checkpoint is written again.",
		Schema: component.ObjectSchema(map[string]any{
			"append_newline": appendNewlineProp(),
		}),
		Example: "type: stdout\nappend_newline: true\n",
	}, NewStdout)
}

var _ component.Output = (*Stdout)(nil)

// StdoutConfig is the configuration of the stdout output.
type StdoutConfig struct {
	AppendNewline bool `json:"append_newline"`
}

// Stdout writes payloads to a writer (os.Stdout unless a test says
// otherwise) through a buffer flushed at the end of each batch.
type Stdout struct {
	newline bool
	out     io.Writer
	w       *bufio.Writer // over out; owned by the goroutine that calls Write
}

// NewStdout builds a stdout output from its configuration.
func NewStdout(conf map[string]any, _ component.Resources) (component.Output, error) {
	return newStdout(conf, os.Stdout)
}

func newStdout(conf map[string]any, w io.Writer) (*Stdout, error) {
	c := StdoutConfig{AppendNewline: true}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	return &Stdout{newline: c.AppendNewline, out: w, w: bufio.NewWriterSize(w, 64<<10)}, nil
}

// Connect does nothing.
func (s *Stdout) Connect(context.Context) error { return nil }

// Write writes every payload, then flushes.
func (s *Stdout) Write(ctx context.Context, b message.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := writePayloads(s.w, b, s.newline)
	if err == nil {
		err = s.w.Flush()
	}
	if err != nil {
		// Drop what the failed batch left buffered (and the writer's sticky
		// error): the runtime writes the batch again.
		s.w.Reset(s.out)
		return fmt.Errorf("stdout: %w", err)
	}
	return nil
}

// Close flushes what is buffered.
func (s *Stdout) Close(context.Context) error { return s.w.Flush() }

// writePayloads writes each payload of b to w, each followed by a newline
// when newline is set.
func writePayloads(w *bufio.Writer, b message.Batch, newline bool) error {
	for i := range b.Messages {
		p, err := b.Messages[i].Payload()
		if err != nil {
			return err
		}
		if _, err := w.Write(p); err != nil {
			return err
		}
		if newline {
			if err := w.WriteByte('\n'); err != nil {
				return err
			}
		}
	}
	return nil
}
