package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/tap"
)

// Errors callers branch on.
var (
	// ErrConfig wraps every problem New finds in a Config.
	ErrConfig = errors.New("invalid stream configuration")
	// ErrConnect wraps a failed Connect of the input or an output.
	ErrConnect = errors.New("connect failed")
	// ErrStopTimeout is returned by Run when the stop deadline passed before
	// every in-flight batch was delivered; the rest were abandoned (their
	// inputs acknowledged with this error so they can be redelivered). It
	// is also the error given to those AckFuncs.
	ErrStopTimeout = errors.New("stop timeout passed, in-flight batches abandoned")
	// ErrReplay wraps a WAL replay failure, which fails the stream.
	ErrReplay = errors.New("WAL replay failed")
	// ErrWALRead wraps a failure to read a batch back from the WAL, which
	// fails the stream.
	ErrWALRead = errors.New("WAL read failed")
	// ErrWALAppend is given, wrapping the cause, to the AckFunc of an input
	// batch whose WAL append failed: the batch is not durable.
	ErrWALAppend = errors.New("WAL append failed")
	// ErrAlreadyRun is returned by a second call of Run.
	ErrAlreadyRun = errors.New("stream already run")
)

// Defaults applied by New to zero fields.
const (
	DefaultStopTimeout  = 30 * time.Second
	DefaultRetryInitial = 100 * time.Millisecond
	DefaultRetryMax     = 10 * time.Second
	DefaultRetryFactor  = 2.0
	DefaultRetryJitter  = 0.2
	// DefaultWALMaxBytes bounds the bytes a stream's WAL holds that are not
	// yet delivered (the config default of durability.max_bytes).
	DefaultWALMaxBytes = 1 << 30
	// DefaultWALMemoryBytes bounds the durable batches held in memory for
	// the pipeline; the rest are read back from the WAL.
	DefaultWALMemoryBytes = 4 << 20
	defaultWALAppendDepth = 4
)

// WAL is the durability hook placed in front of the pipeline. The stream
// appends every batch read from the input, acknowledges the input once the
// append is durable, and from then on feeds the pipeline from the WAL: from
// memory while the pipeline keeps up, through Read when it fell behind. It
// calls Ack with the entry's sequence number once an output accepted the
// batch. Sizes are what an entry counts against Config.WALMaxBytes.
type WAL interface {
	// Append starts storing b and returns at once with the entry's
	// sequence number, its size and a channel that yields one value: nil
	// once the entry is durable, or the error that prevented it. Entries
	// are numbered in call order. The stream calls Append from one
	// goroutine, at most Config.WALAppendDepth unfinished at a time.
	Append(b message.Batch) (seq uint64, size int64, done <-chan error)
	// Ack marks an entry delivered; it may then be discarded.
	Ack(seq uint64) error
	// ReplayBytes is the total size of the entries Replay visits. The
	// stream calls it once, before any Append.
	ReplayBytes() int64
	// Replay calls fn, in order, for each entry not acknowledged before the
	// last restart. The stream calls it once, while new input is already
	// being appended.
	Replay(ctx context.Context, fn func(seq uint64, b message.Batch, size int64) error) error
	// Read returns the first entry with from <= seq < limit whose append
	// was reported durable (found false: there is none). The stream calls
	// it from one goroutine, from never going back past an entry returned.
	Read(ctx context.Context, from, limit uint64) (seq uint64, b message.Batch, size int64, found bool, err error)
}

// Backoff is a capped exponential backoff with jitter. Zero fields take the
// defaults (100ms, 10s, factor 2, jitter 0.2).
type Backoff struct {
	Initial    time.Duration
	Max        time.Duration
	Multiplier float64
	// Jitter is the fraction (0 < Jitter <= 1) by which each delay is
	// randomly stretched or shrunk; other values mean the default.
	Jitter float64
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultRetryInitial
	}
	if b.Max <= 0 {
		b.Max = DefaultRetryMax
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.Multiplier < 1 {
		b.Multiplier = DefaultRetryFactor
	}
	if b.Jitter <= 0 || b.Jitter > 1 {
		b.Jitter = DefaultRetryJitter
	}
	return b
}

// Delay returns the wait before retry number attempt (1 for the first
// retry): Initial*Multiplier^(attempt-1), jittered, never above Max.
// It expects a Backoff with defaults applied (New does that).
func (b Backoff) Delay(attempt int) time.Duration {
	b = b.withDefaults()
	d := float64(b.Initial) * math.Pow(b.Multiplier, float64(max(attempt-1, 0)))
	d = min(d, float64(b.Max))
	d *= 1 - b.Jitter + 2*b.Jitter*rand.Float64()
	return time.Duration(min(d, float64(b.Max)))
}

// Config is everything one stream runs with. The components are built by
// the caller; the stream owns them from Run on and closes each once.
type Config struct {
	ID          string
	Input       component.Input
	Buffer      component.Buffer // optional
	Processors  []component.Processor
	ThreadNum   int // workers running the processors; 0 means 1
	Output      component.Output
	ErrorOutput component.Output // optional: receives batches a processor failed on
	// Temporaries are the stream's lookup tables (processors hold them
	// already); the stream connects them first and closes them last.
	Temporaries []component.Temporary
	// MaxConnectAttempts bounds the Connect attempts of each component:
	// after that many failures Run fails with ErrConnect. 0 means retry
	// (paced by Retry) until the stream is stopped, staying starting.
	MaxConnectAttempts int
	// MaxInFlight bounds the batches between being handed to the pipeline
	// and being acknowledged; when it is reached the input is not read.
	// 0 means 4*ThreadNum+4.
	MaxInFlight int
	// Retry paces the retries of failed connects, of failed output,
	// error_output and WAL writes and of failed input and buffer reads.
	Retry Backoff
	// StopTimeout bounds a graceful stop; 0 means DefaultStopTimeout.
	StopTimeout time.Duration
	WAL         WAL // optional
	// WALAppendDepth is how many WAL appends may be in flight at once, so
	// that a group-commit WAL can share one sync among them; 0 means 4.
	// Appends are numbered in read order whatever the depth.
	WALAppendDepth int
	// WALMaxBytes bounds the bytes of WAL entries not yet delivered: when
	// they reach it the input is not read. 0 means DefaultWALMaxBytes.
	WALMaxBytes int64
	// WALMemoryBytes bounds the durable batches kept in memory waiting for
	// the pipeline; beyond it they are read back from the WAL. 0 means
	// DefaultWALMemoryBytes.
	WALMemoryBytes int64
	Logger         *slog.Logger
	Metrics        *Metrics // optional
	// Taps, when set, is offered what passes each stage (tap.PointInput,
	// tap.ProcessorPoint(i) by configured index, tap.PointOutput); the
	// caller keeps it across restarts. Without a tap attached it costs
	// one atomic load per stage and batch.
	Taps *tap.Set
	// Tracer, when set, traces every batch: a span per batch with spans
	// for its input, each processor and its output (trace.go), the parent
	// taken from the traceparent of its messages. Nil is tracing off.
	Tracer trace.Tracer
}

// withDefaults validates c and fills zero fields.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.Input == nil {
		errs = append(errs, errors.New("input is required"))
	}
	if c.Output == nil {
		errs = append(errs, errors.New("output is required"))
	}
	for i, p := range c.Processors {
		if p == nil {
			errs = append(errs, fmt.Errorf("processors[%d] is nil", i))
		}
	}
	if c.ThreadNum < 0 {
		errs = append(errs, fmt.Errorf("thread_num %d is negative", c.ThreadNum))
	}
	for i, t := range c.Temporaries {
		if t == nil {
			errs = append(errs, fmt.Errorf("temporaries[%d] is nil", i))
		}
	}
	if c.MaxConnectAttempts < 0 {
		errs = append(errs, fmt.Errorf("max connect attempts %d is negative", c.MaxConnectAttempts))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("max in flight %d is negative", c.MaxInFlight))
	}
	if c.WALAppendDepth < 0 {
		errs = append(errs, fmt.Errorf("WAL append depth %d is negative", c.WALAppendDepth))
	}
	if c.WALMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("WAL max bytes %d is negative", c.WALMaxBytes))
	}
	if c.WALMemoryBytes < 0 {
		errs = append(errs, fmt.Errorf("WAL memory bytes %d is negative", c.WALMemoryBytes))
	}
	if c.StopTimeout < 0 {
		errs = append(errs, fmt.Errorf("stop timeout %s is negative", c.StopTimeout))
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	c.ThreadNum = max(c.ThreadNum, 1)
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 4*c.ThreadNum + 4
	}
	if c.WALAppendDepth == 0 {
		c.WALAppendDepth = defaultWALAppendDepth
	}
	if c.WALMaxBytes == 0 {
		c.WALMaxBytes = DefaultWALMaxBytes
	}
	if c.WALMemoryBytes == 0 {
		c.WALMemoryBytes = DefaultWALMemoryBytes
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	c.Retry = c.Retry.withDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
