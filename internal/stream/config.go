package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
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
	// ErrAlreadyRun is returned by a second call of Run.
	ErrAlreadyRun = errors.New("stream already run")
)

// Defaults applied by New to zero fields.
const (
	DefaultStopTimeout    = 30 * time.Second
	DefaultRetryInitial   = 100 * time.Millisecond
	DefaultRetryMax       = 10 * time.Second
	DefaultRetryFactor    = 2.0
	DefaultRetryJitter    = 0.2
	defaultWALAppendDepth = 4
)

// WAL is the durability hook placed in front of the pipeline. The stream
// appends every batch read from the input before it enters the pipeline,
// acknowledges the input once the append returned, and calls Ack with the
// entry's sequence number once an output accepted the batch.
type WAL interface {
	// Append stores b and returns once it is durable per the WAL's mode.
	// It may be called from several goroutines at once.
	Append(ctx context.Context, b message.Batch) (seq uint64, err error)
	// Ack marks an entry delivered; it may then be discarded.
	Ack(seq uint64) error
	// Replay calls fn, in order, for each entry not acknowledged before
	// the last restart. The stream calls it once, before reading input.
	Replay(ctx context.Context, fn func(seq uint64, b message.Batch) error) error
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
	// MaxInFlight bounds the batches between being handed to the pipeline
	// and being acknowledged; when it is reached the input is not read.
	// 0 means 4*ThreadNum+4.
	MaxInFlight int
	// Retry paces the retries of failed output, error_output and WAL writes
	// and of failed input and buffer reads.
	Retry Backoff
	// StopTimeout bounds a graceful stop; 0 means DefaultStopTimeout.
	StopTimeout time.Duration
	WAL         WAL // optional
	// WALAppendDepth is how many WAL appends may be in flight at once, so
	// that a group-commit WAL can share one sync among them; 0 means 4.
	// Batches enter the pipeline in read order whatever the depth, but
	// appends running at once may take their WAL sequence numbers in
	// another order, so a replay after a restart may swap batches read at
	// most WALAppendDepth-1 apart. 1 keeps the WAL in read order.
	WALAppendDepth int
	Logger         *slog.Logger
	Metrics        *Metrics // optional
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
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("max in flight %d is negative", c.MaxInFlight))
	}
	if c.WALAppendDepth < 0 {
		errs = append(errs, fmt.Errorf("WAL append depth %d is negative", c.WALAppendDepth))
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
	if c.StopTimeout == 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	c.Retry = c.Retry.withDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
