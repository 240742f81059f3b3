package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flowplane/flowplane/internal/message"
)

// events is a shared, ordered log of what the test components saw.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(format string, args ...any) {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.log = append(e.log, fmt.Sprintf(format, args...))
	e.mu.Unlock()
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.log)
}

// index returns the position of the first event equal to s, or -1.
func (e *events) index(s string) int { return slices.Index(e.list(), s) }

// closer counts Close calls.
type closer struct{ closes atomic.Int32 }

func (c *closer) Close(context.Context) error { c.closes.Add(1); return nil }

// testInput produces n batches of size messages whose payloads are the
// global message numbers "0", "1", ...; n < 0 means endless. It records
// every acknowledgement.
type testInput struct {
	closer
	n, size    int
	endless    bool  // after n batches, block until ctx ends instead of ErrEndOfInput
	connectErr error // returned by Connect
	// connectFails, when positive, makes only the first connectFails
	// calls of Connect return connectErr.
	connectFails int
	connects     atomic.Int64
	ev           *events

	reads atomic.Int64
	mu    sync.Mutex // guards next and acks
	next  int
	acks  map[int][]error
}

func newInput(n, size int) *testInput { return &testInput{n: n, size: size, acks: map[int][]error{}} }

func (in *testInput) Connect(context.Context) error {
	if n := in.connects.Add(1); in.connectFails > 0 && n > int64(in.connectFails) {
		return nil
	}
	return in.connectErr
}

func (in *testInput) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if err := ctx.Err(); err != nil {
		return message.Batch{}, nil, err
	}
	in.mu.Lock()
	i := in.next
	if in.n >= 0 && i >= in.n {
		in.mu.Unlock()
		if in.endless {
			<-ctx.Done()
			return message.Batch{}, nil, ctx.Err()
		}
		return message.Batch{}, nil, message.ErrEndOfInput
	}
	in.next++
	in.mu.Unlock()
	in.reads.Add(1)
	b := message.Batch{Messages: make([]message.Message, in.size)}
	for j := range b.Messages {
		b.Messages[j] = message.New([]byte(strconv.Itoa(i*in.size + j)))
	}
	in.ev.add("read %d", i)
	return b, func(_ context.Context, err error) error {
		in.mu.Lock()
		in.acks[i] = append(in.acks[i], err)
		in.mu.Unlock()
		in.ev.add("ack %d %v", i, err)
		return nil
	}, nil
}

func (in *testInput) ackCalls(i int) []error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.acks[i])
}

// checkAcks fails unless every batch read was acknowledged exactly once,
// with nil.
func (in *testInput) checkAcks(t *testing.T) {
	t.Helper()
	in.mu.Lock()
	defer in.mu.Unlock()
	for i := range in.next {
		if a := in.acks[i]; len(a) != 1 || a[0] != nil {
			t.Errorf("batch %d acknowledged %v, want exactly one nil", i, a)
		}
	}
	if len(in.acks) != in.next {
		t.Errorf("%d batches acknowledged, %d read", len(in.acks), in.next)
	}
}

// procFunc is a processor defined by a function.
type procFunc struct {
	closer
	fn func(ctx context.Context, b message.Batch) ([]message.Batch, error)
}

func (p *procFunc) Process(ctx context.Context, b message.Batch) ([]message.Batch, error) {
	return p.fn(ctx, b)
}

// testOutput records what it accepts. fail, when set, decides per attempt
// (counted from 1) whether Write fails; block, when set, makes every Write
// wait for a receive from it (or ctx).
type testOutput struct {
	closer
	name       string
	connectErr error
	fail       func(attempt int, b message.Batch) error
	block      chan struct{}
	ev         *events

	mu       sync.Mutex // guards the fields below
	attempts int
	batches  []message.Batch
}

func (o *testOutput) Connect(context.Context) error { return o.connectErr }

func (o *testOutput) Write(ctx context.Context, b message.Batch) error {
	if o.block != nil {
		select {
		case <-o.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	o.mu.Lock()
	o.attempts++
	n := o.attempts
	o.mu.Unlock()
	if o.fail != nil {
		if err := o.fail(n, b); err != nil {
			return err
		}
	}
	o.mu.Lock()
	o.batches = append(o.batches, b)
	o.mu.Unlock()
	for _, p := range payloads(b) {
		o.ev.add("%s %s", o.name, p)
	}
	return nil
}

func (o *testOutput) written() []message.Batch {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.batches)
}

// messages returns the payloads accepted so far, in order.
func (o *testOutput) messages() []string {
	var out []string
	for _, b := range o.written() {
		out = append(out, payloads(b)...)
	}
	return out
}

func payloads(b message.Batch) []string {
	out := make([]string, 0, b.Len())
	for i := range b.Messages {
		p, _ := b.Messages[i].Payload()
		out = append(out, string(p))
	}
	return out
}

func seqStrings(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}

// fakeWAL is an in-memory WAL. It keeps copies of the payloads (as a WAL
// keeps its own bytes), so what the stream holds can be told apart. gate,
// when set, makes each append wait for a receive from it before it becomes
// durable. An entry's size is the length of its payloads.
type fakeWAL struct {
	gate      chan struct{}
	appendErr func(attempt int) error
	replayErr error
	ev        *events

	mu       sync.Mutex // guards the fields below
	seq      uint64
	durable  uint64 // entries below are durable
	replayTo uint64 // entries up to it are replayed (set by ReplayBytes)
	attempts int
	entries  map[uint64]message.Batch
	acked    []uint64
	reads    int // entries read back through Read
}

func newWAL() *fakeWAL { return &fakeWAL{entries: map[uint64]message.Batch{}} }

func copyBatch(b message.Batch) message.Batch {
	c := message.Batch{Messages: make([]message.Message, len(b.Messages))}
	for i := range b.Messages {
		p, _ := b.Messages[i].Payload()
		c.Messages[i] = message.New(bytes.Clone(p))
	}
	return c
}

func batchSize(b message.Batch) int64 {
	var n int64
	for i := range b.Messages {
		p, _ := b.Messages[i].Payload()
		n += int64(len(p))
	}
	return n
}

// put stores b durably under the next seq (a test's setup).
func (w *fakeWAL) put(b message.Batch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	w.entries[w.seq] = copyBatch(b)
	w.durable = w.seq + 1
}

func (w *fakeWAL) Append(b message.Batch) (uint64, int64, <-chan error) {
	done := make(chan error, 1)
	w.mu.Lock()
	w.attempts++
	n := w.attempts
	w.mu.Unlock()
	if w.appendErr != nil {
		if err := w.appendErr(n); err != nil {
			done <- err
			return 0, 0, done
		}
	}
	w.mu.Lock()
	w.seq++
	seq := w.seq
	w.entries[seq] = copyBatch(b)
	w.mu.Unlock()
	durable := func() {
		w.mu.Lock()
		w.durable = max(w.durable, seq+1)
		w.mu.Unlock()
		w.ev.add("append %s", payloads(b)[0])
		done <- nil
	}
	if w.gate == nil {
		durable()
	} else {
		go func() {
			<-w.gate
			durable()
		}()
	}
	return seq, batchSize(b), done
}

func (w *fakeWAL) Ack(seq uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, ok := w.entries[seq]
	if !ok {
		return fmt.Errorf("unknown seq %d", seq)
	}
	delete(w.entries, seq)
	w.acked = append(w.acked, seq)
	w.ev.add("walack %s", payloads(b)[0])
	return nil
}

func (w *fakeWAL) ReplayBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.replayTo = w.seq
	var n int64
	for _, b := range w.entries {
		n += batchSize(b)
	}
	return n
}

func (w *fakeWAL) Replay(ctx context.Context, fn func(uint64, message.Batch, int64) error) error {
	if w.replayErr != nil {
		return w.replayErr
	}
	w.mu.Lock()
	seqs := make([]uint64, 0, len(w.entries))
	for s := range w.entries {
		if s <= w.replayTo {
			seqs = append(seqs, s)
		}
	}
	w.mu.Unlock()
	slices.Sort(seqs)
	for _, s := range seqs {
		w.mu.Lock()
		b := copyBatch(w.entries[s])
		w.mu.Unlock()
		if err := fn(s, b, batchSize(b)); err != nil {
			return err
		}
	}
	return nil
}

func (w *fakeWAL) Read(ctx context.Context, from, limit uint64) (uint64, message.Batch, int64, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for s := from; s < limit && s < w.durable; s++ {
		if b, ok := w.entries[s]; ok {
			w.reads++
			b = copyBatch(b)
			return s, b, batchSize(b), true, nil
		}
	}
	return 0, message.Batch{}, 0, false, nil
}

func (w *fakeWAL) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.entries)
}

// groupBuffer merges up to group batches into one (a count window) and
// flushes a partial group on Close. The ack of a merged batch acknowledges
// every batch in it.
type groupBuffer struct {
	group  int
	closes atomic.Int32

	mu      sync.Mutex // guards the fields below
	pending message.Batch
	acks    []message.AckFunc
	closed  bool
	ready   chan struct{} // buffered(1): something to read
	out     []bufItem
}

type bufItem struct {
	b   message.Batch
	ack message.AckFunc
}

func newGroupBuffer(group int) *groupBuffer {
	return &groupBuffer{group: group, ready: make(chan struct{}, 1)}
}

func (g *groupBuffer) Write(_ context.Context, b message.Batch, ack message.AckFunc) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errors.New("buffer closed")
	}
	g.pending.Messages = append(g.pending.Messages, b.Messages...)
	g.acks = append(g.acks, ack)
	if len(g.acks) == g.group {
		g.emitLocked()
	}
	return nil
}

func (g *groupBuffer) emitLocked() {
	if len(g.acks) == 0 {
		return
	}
	acks := g.acks
	g.out = append(g.out, bufItem{b: g.pending, ack: func(ctx context.Context, err error) error {
		for _, a := range acks {
			_ = a(ctx, err)
		}
		return nil
	}})
	g.pending, g.acks = message.Batch{}, nil
	select {
	case g.ready <- struct{}{}:
	default:
	}
}

func (g *groupBuffer) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	for {
		g.mu.Lock()
		if len(g.out) > 0 {
			it := g.out[0]
			g.out = g.out[1:]
			g.mu.Unlock()
			return it.b, it.ack, nil
		}
		if g.closed {
			g.mu.Unlock()
			return message.Batch{}, nil, message.ErrEndOfInput
		}
		g.mu.Unlock()
		select {
		case <-g.ready:
		case <-ctx.Done():
			return message.Batch{}, nil, ctx.Err()
		}
	}
}

func (g *groupBuffer) Close(context.Context) error {
	g.closes.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.emitLocked()
		g.closed = true
		select {
		case g.ready <- struct{}{}:
		default:
		}
	}
	return nil
}

// stateLog collects the states a stream goes through.
type stateLog struct {
	mu     sync.Mutex
	states []State
}

func watch(s *Stream) *stateLog {
	l := &stateLog{}
	s.Subscribe(func(st State) {
		l.mu.Lock()
		l.states = append(l.states, st)
		l.mu.Unlock()
	})
	return l
}

func (l *stateLog) get() []State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.states)
}

func mustNew(t *testing.T, cfg Config) *Stream {
	t.Helper()
	if cfg.ID == "" {
		cfg.ID = "test"
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runAsync runs s and returns a channel with Run's result.
func runAsync(ctx context.Context, s *Stream) <-chan error {
	c := make(chan error, 1)
	go func() { c <- s.Run(ctx) }()
	return c
}

// num is the number in a test message's payload.
func num(m message.Message) int {
	p, _ := m.Payload()
	n, _ := strconv.Atoi(string(p))
	return n
}
