package input

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterInput(component.Spec{
		Name: "stdin",
		Summary: "Reads lines from standard input, one message per line, and ends at end of file. It cannot be " +
			"split or replayed: a job reads it at parallelism 1 and cannot re-read it after a restore.",
		Schema: component.ObjectSchema(map[string]any{
			"batch_size": batchSizeProp(),
		}),
		Example: `type: stdin
batch_size: 1
`,
	}, NewStdin)
}

var _ component.Input = (*Stdin)(nil)

// StdinConfig is the configuration of the stdin input.
type StdinConfig struct {
	BatchSize int `json:"batch_size"`
}

// Stdin reads lines from a reader (os.Stdin unless a test says otherwise).
// A goroutine started by Connect does the blocking reads so that Read can
// honour ctx; it ends at end of file, on a read error, or on Close once its
// pending read returns.
type Stdin struct {
	in        io.Reader
	batchSize int
	redo      redelivery

	lines     chan []byte // pump -> Read; closed by pump at end of input
	closed    chan struct{}
	closeOnce sync.Once

	mu      sync.Mutex // guards readErr
	readErr error      // why the pump stopped, nil at end of file
}

// NewStdin builds a stdin input from its configuration.
func NewStdin(conf map[string]any, res component.Resources) (component.Input, error) {
	return newStdin(conf, res, os.Stdin)
}

func newStdin(conf map[string]any, res component.Resources, in io.Reader) (*Stdin, error) {
	c := StdinConfig{BatchSize: 1}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	if err := checkBatchSize(c.BatchSize); err != nil {
		return nil, err
	}
	return &Stdin{
		in:        in,
		batchSize: c.BatchSize,
		redo:      redelivery{log: res.Logger, source: "stdin"},
		lines:     make(chan []byte, c.BatchSize),
		closed:    make(chan struct{}),
	}, nil
}

// Connect starts reading.
func (s *Stdin) Connect(context.Context) error {
	go s.pump()
	return nil
}

func (s *Stdin) pump() {
	defer close(s.lines)
	r := bufio.NewReaderSize(s.in, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			select {
			case s.lines <- line:
			case <-s.closed:
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.mu.Lock()
				s.readErr = err
				s.mu.Unlock()
			}
			return
		}
	}
}

// Read returns the lines available now, up to batch_size, waiting for the
// first one; message.ErrEndOfInput at end of file.
func (s *Stdin) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if b, ok := s.redo.next(); ok {
		return b, s.redo.ackFor(b), nil
	}
	var line []byte
	var ok bool
	select {
	case line, ok = <-s.lines:
	case <-ctx.Done():
		return message.Batch{}, nil, ctx.Err()
	case <-s.closed:
		return message.Batch{}, nil, errInputClosed
	}
	if !ok {
		return s.end()
	}
	msgs := []message.Message{stdinMessage(line)}
	for len(msgs) < s.batchSize {
		select {
		case line, ok = <-s.lines:
		default:
			ok = false
		}
		if !ok {
			break
		}
		msgs = append(msgs, stdinMessage(line))
	}
	b := message.Batch{Messages: msgs}
	return b, s.redo.ackFor(b), nil
}

// end reports the end of input, a read error, or a batch still to redeliver.
func (s *Stdin) end() (message.Batch, message.AckFunc, error) {
	s.mu.Lock()
	err := s.readErr
	s.mu.Unlock()
	if err != nil {
		return message.Batch{}, nil, fmt.Errorf("stdin: %w", err)
	}
	if s.redo.end() {
		return message.Batch{}, nil, message.ErrEndOfInput
	}
	b, _ := s.redo.next()
	return b, s.redo.ackFor(b), nil
}

func stdinMessage(line []byte) message.Message {
	m := message.New(line)
	m.Meta.Source = "stdin"
	return m
}

// Close stops handing out lines. A read already blocked on the reader
// keeps its goroutine until that read returns.
func (s *Stdin) Close(context.Context) error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}
