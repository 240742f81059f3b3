package stream

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/tap"
)

// State is the lifecycle state of a stream.
type State string

// The states of a stream: starting -> running -> completed, or
// running -> stopping -> stopped, or failed from starting or running.
const (
	StateStarting  State = "starting"
	StateRunning   State = "running"
	StateStopping  State = "stopping"
	StateStopped   State = "stopped"
	StateCompleted State = "completed"
	StateFailed    State = "failed"
)

// Terminal reports whether no state follows s.
func (s State) Terminal() bool {
	return s == StateStopped || s == StateCompleted || s == StateFailed
}

// Status is a snapshot of a stream. Message counters count messages;
// Errors counts failure events (a failed write, a failed processor call, a
// failed acknowledgement...); Retries counts retried writes and reads;
// InFlight and Abandoned count batches.
type Status struct {
	ID          string
	State       State
	Received    uint64 // messages read from the input (and replayed from the WAL)
	Sent        uint64 // messages accepted by the output or error_output
	Errors      uint64
	Dropped     uint64 // messages lost to a processor failure without error_output
	Retries     uint64
	InFlight    int
	LastError   string
	LastErrorAt time.Time
	StartedAt   time.Time
	Abandoned   int // batches given up at the stop deadline
	// WALBacklogBytes is the size of the WAL entries not yet delivered
	// (0 without durability).
	WALBacklogBytes int64
}

// Stream runs one stream. Create it with New, run it once with Run; Status
// and Subscribe are safe for concurrent use at any time.
type Stream struct {
	cfg Config
	log *slog.Logger
	m   *streamMetrics // nil without Config.Metrics

	ran      atomic.Bool // Run was called
	walQueue atomic.Pointer[walQueue]

	staged int       // leading processors run as a buffer stage (stage.go), not in cfg.Processors
	names  spanNames // with cfg.Tracer only
	// procPoints names the tap point after each configured processor.
	procPoints []string

	dropLog logSampler // paces "batch dropped" lines

	received, sent, errors, dropped, retries atomic.Uint64
	inFlight, abandoned                      atomic.Int64

	// notifyMu serializes state changes with the subscriber calls they
	// cause, so each subscriber sees states in order. Taken before mu.
	notifyMu sync.Mutex
	// mu guards the fields below.
	mu        sync.Mutex
	state     State
	lastErr   string
	lastErrAt time.Time
	startedAt time.Time
	subs      []subscriber // copied on write
	nextSub   int
}

type subscriber struct {
	id int
	fn func(State)
}

// New checks cfg, applies defaults and returns a stream in state starting.
// It does not connect or close anything: on error the caller still owns
// the components.
func New(cfg Config) (*Stream, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg, staged, err := cfg.withBatcher()
	if err != nil {
		return nil, err
	}
	s := &Stream{cfg: cfg, log: cfg.Logger, state: StateStarting, dropLog: logSampler{interval: time.Second}}
	s.staged = staged
	s.procPoints = make([]string, staged+len(cfg.Processors))
	for i := range s.procPoints {
		s.procPoints[i] = tap.ProcessorPoint(i)
	}
	if cfg.Tracer != nil {
		s.names = newSpanNames(cfg, staged)
	}
	if cfg.Metrics != nil {
		s.m = cfg.Metrics.forStream(cfg.ID, cfg.WAL != nil, len(cfg.Temporaries) > 0)
	}
	return s, nil
}

// Status returns a snapshot of the stream's state and counters.
func (s *Stream) Status() Status {
	s.mu.Lock()
	st := Status{
		ID:          s.cfg.ID,
		State:       s.state,
		LastError:   s.lastErr,
		LastErrorAt: s.lastErrAt,
		StartedAt:   s.startedAt,
	}
	s.mu.Unlock()
	st.Received = s.received.Load()
	st.Sent = s.sent.Load()
	st.Errors = s.errors.Load()
	st.Dropped = s.dropped.Load()
	st.Retries = s.retries.Load()
	st.InFlight = int(s.inFlight.Load())
	st.Abandoned = int(s.abandoned.Load())
	if q := s.walQueue.Load(); q != nil {
		st.WALBacklogBytes = q.backlog()
	}
	return st
}

// Subscribe calls fn with the current state at once and then with every
// later state, in order and never concurrently, from the goroutine that
// changes the state. fn must not block and must not call Subscribe; it may
// call Status and the returned cancel function. After cancel returns, fn
// may still receive the one call already under way.
func (s *Stream) Subscribe(fn func(State)) (cancel func()) {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	s.mu.Lock()
	id := s.nextSub
	s.nextSub++
	s.subs = append(slices.Clip(s.subs), subscriber{id: id, fn: fn})
	cur := s.state
	s.mu.Unlock()
	fn(cur)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.subs = slices.DeleteFunc(slices.Clone(s.subs), func(x subscriber) bool { return x.id == id })
	}
}

func (s *Stream) setState(st State) {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	s.mu.Lock()
	if s.state == st {
		s.mu.Unlock()
		return
	}
	s.state = st
	subs := s.subs
	s.mu.Unlock()
	s.log.Info("stream state", "state", string(st))
	for _, sub := range subs {
		sub.fn(st)
	}
}

// recordError counts a failure of the component of kind k and remembers it.
func (s *Stream) recordError(k kind, err error) {
	s.errors.Add(1)
	if s.m != nil {
		s.m.errors[k].Inc()
	}
	now := time.Now()
	s.mu.Lock()
	s.lastErr = string(k) + ": " + err.Error()
	s.lastErrAt = now
	s.mu.Unlock()
}

// offerProcessed offers what configured processor i made to the taps
// after it.
func (s *Stream) offerProcessed(i int, bs []message.Batch) {
	if s.cfg.Taps.Attached() == 0 {
		return
	}
	for _, b := range bs {
		s.cfg.Taps.Offer(s.procPoints[i], b)
	}
}

func (s *Stream) recordRetry(k kind) {
	s.retries.Add(1)
	if s.m != nil {
		s.m.retries[k].Inc()
	}
}
