package component

import (
	"context"
	"errors"
	"log/slog"

	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// Kind is the role a component plays in a stream.
type Kind string

// The kinds of components.
const (
	KindInput     Kind = "input"
	KindBuffer    Kind = "buffer"
	KindProcessor Kind = "processor"
	KindOutput    Kind = "output"
)

// Kinds lists every kind in pipeline order, then temporary tables and codecs.
var Kinds = []Kind{KindInput, KindBuffer, KindProcessor, KindOutput, KindTemporary, KindCodec}

// Resources are what a constructor may use. Logger is never nil once built
// by the registry.
type Resources struct {
	StreamID string
	Logger   *slog.Logger
	// Temporary finds one of the stream's temporary tables by name (nil
	// outside a stream, or in a stream that declares none). A processor
	// that uses one looks it up in its constructor and fails the build,
	// naming the field, when it is missing.
	Temporary func(name string) (Temporary, bool)
	// FS is how the component opens, creates and removes files; Net is
	// how it connects to destinations (its clients' dialer). Their zero
	// values are the host's own; for work the Hub delivered they are
	// the node's remote policy at the moment of use (package sandbox), so
	// a component must never reach files or the network around them.
	FS  sandbox.FS
	Net sandbox.Net
}

// Input produces batches.
//
// The runtime calls Connect once, then Read repeatedly from one goroutine,
// then Close once (also after a failed Connect). Read blocks until a batch is
// ready or ctx ends; it returns message.ErrEndOfInput when a finite input is
// exhausted. The returned AckFunc is called exactly once per batch, possibly
// from another goroutine and after later Reads: an input must keep
// unacknowledged data until then (at-least-once).
type Input interface {
	Connect(ctx context.Context) error
	Read(ctx context.Context) (message.Batch, message.AckFunc, error)
	Close(ctx context.Context) error
}

// Processor transforms one batch into zero or more batches.
//
// Process may be called concurrently from thread_num workers and must not
// keep the batch after returning. An error means the whole batch failed: the
// runtime routes the original batch to error_output. Returning no batches (or
// empty ones) drops the messages, which then count as delivered.
type Processor interface {
	Process(ctx context.Context, b message.Batch) ([]message.Batch, error)
	Close(ctx context.Context) error
}

// Output consumes batches.
//
// The runtime calls Connect once, then Write from one goroutine in input
// order, then Close. A nil error from Write means the batch is accepted (the
// input is then acknowledged); an error means it was not and the runtime
// retries with backoff. Write must honour ctx.
type Output interface {
	Connect(ctx context.Context) error
	Write(ctx context.Context, b message.Batch) error
	Close(ctx context.Context) error
}

// Buffer sits between input and processors and may regroup batches (windows).
//
// Write is called from the input side, Read from the processor side, each
// from one goroutine. A batch read from a buffer carries an AckFunc that
// acknowledges every input batch it contains. Close flushes what is held so
// that Read returns it and then message.ErrEndOfInput.
type Buffer interface {
	Write(ctx context.Context, b message.Batch, ack message.AckFunc) error
	Read(ctx context.Context) (message.Batch, message.AckFunc, error)
	Close(ctx context.Context) error
}

// Batcher is a processor that gathers messages across the batches it is
// handed (the batch processor). Holding messages needs their
// acknowledgements, which Process cannot carry, so the stream runtime does
// not call its Process: it drives it as a stage in front of the workers,
// exactly like a Buffer placed after the stream's buffer. A Batcher must
// therefore be the first processor of a stream.
//
// Write is called in input order from one goroutine and may wait while the
// Batcher is full (back-pressure); an error means it did not take the
// batch and will not call ack. Read, from one goroutine, returns a merged
// batch whose AckFunc acknowledges each input batch it holds messages of
// exactly once, only after every merged batch holding any of its messages
// was acknowledged, with the first error one of them was given. Close
// flushes: Read returns what is held and then message.ErrEndOfInput.
// Process, for callers that cannot hand acknowledgements over, must not
// hold messages.
type Batcher interface {
	Processor
	Write(ctx context.Context, b message.Batch, ack message.AckFunc) error
	Read(ctx context.Context) (message.Batch, message.AckFunc, error)
}

// Constructors build a component from its decoded configuration: the
// component object without its "type" field, secrets already resolved and
// the schema already checked.
type (
	InputCtor     func(conf map[string]any, res Resources) (Input, error)
	BufferCtor    func(conf map[string]any, res Resources) (Buffer, error)
	ProcessorCtor func(conf map[string]any, res Resources) (Processor, error)
	OutputCtor    func(conf map[string]any, res Resources) (Output, error)
)

// permanentError marks a Connect error no retry can fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err, returned by Connect, as one that retrying cannot
// fix (a path that is a directory, say): the stream fails at once instead
// of retrying. A server that is down or refuses a connection is not
// permanent: it may come back.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err was marked by Permanent, or is a
// refusal by the node's remote policy at use (sandbox.ErrDenied): the
// policy does not change while the work runs, so retrying only repeats
// the refusal.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p) || errors.Is(err, sandbox.ErrDenied)
}
