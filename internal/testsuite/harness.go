package testsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/kernel"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/operator"
)

// The component types the harness puts in place of a job's sources and
// sinks; the configuration's own are never built.
const (
	sourceType = "testsuite_source"
	sinkType   = "testsuite_sink"
)

// harnessRegistry holds only the harness' source and sink: a job case
// builds nothing else from a registry.
func harnessRegistry() *component.Registry {
	reg := component.NewRegistry()
	reg.RegisterInput(component.Spec{Name: sourceType, Summary: "flowplane test: a scripted source"}, func(conf map[string]any, _ component.Resources) (component.Input, error) {
		l, ok := conf["log"].(*sourceLog)
		if !ok {
			return nil, fmt.Errorf("%s is the test harness' own", sourceType)
		}
		return &scripted{log: l}, nil
	})
	reg.RegisterOutput(component.Spec{Name: sinkType, Summary: "flowplane test: a transactional collecting sink"}, func(conf map[string]any, _ component.Resources) (component.Output, error) {
		s, ok := conf["store"].(*sinkStore)
		if !ok {
			return nil, fmt.Errorf("%s is the test harness' own", sinkType)
		}
		return &txSink{s: s}, nil
	})
	return reg
}

// emission is what one Read of a scripted source yields: records, the
// watermark and idleness that hold after them, or the end of input.
type emission struct {
	records []any
	wm      int64
	idle    bool
	end     bool
}

// sourceLog is a source's script, appended to by the test's steps and
// kept across restarts as a broker's log would be: a source instance reads
// it from its position, which checkpoints record.
type sourceLog struct {
	mu      sync.Mutex    // guards the fields below
	wake    chan struct{} // closed and replaced when the log grows or a reader blocks
	items   []emission
	wm      int64 // the clock the next emission carries
	idle    bool
	waiting int // position of the reader blocked in Read at the log's end; -1 when none
	sought  int // the position the last Seek set; -1 when none
}

func newSourceLog() *sourceLog {
	return &sourceLog{wake: make(chan struct{}), wm: operator.NoTime, waiting: -1, sought: -1}
}

func (l *sourceLog) signal() {
	close(l.wake)
	l.wake = make(chan struct{})
}

// add appends records, a clock change or the end.
func (l *sourceLog) add(e emission) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(e.records) == 0 && !e.end {
		if e.idle {
			l.idle = true
		} else if e.wm != operator.NoTime {
			l.wm, l.idle = max(l.wm, e.wm), false
		}
	} else if len(e.records) > 0 {
		l.idle = false
	}
	e.wm, e.idle = l.wm, l.idle
	l.items = append(l.items, e)
	l.signal()
}

// restarted forgets the reader of the attempt that ended.
func (l *sourceLog) restarted() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiting, l.sought = -1, -1
}

// replayed is how many records the source read again after a restart:
// those between the position its checkpoint recorded and the log's end.
func (l *sourceLog) replayed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	if l.sought >= 0 {
		for _, e := range l.items[l.sought:] {
			n += len(e.records)
		}
	}
	return n
}

// drained waits until the source task took every emission before the
// last one: a reader blocked at the end of the log has handed the last
// emission to the task's channel of one, which it could only do once the
// task took the one before. The caller appends a filler emission first.
func (l *sourceLog) drained(ctx context.Context) error {
	for {
		l.mu.Lock()
		done := l.waiting == len(l.items)
		wake := l.wake
		l.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return fmt.Errorf("the source did not take its records: %w", context.Cause(ctx))
		}
	}
}

// scripted is one instance of a test source: it reads its log from pos.
type scripted struct {
	log     *sourceLog
	pos     int
	wm      int64
	idle    bool
	started bool
}

var (
	_ kernel.Clocked       = (*scripted)(nil)
	_ component.Replayable = (*scripted)(nil)
)

func (s *scripted) Connect(context.Context) error { return nil }
func (s *scripted) Close(context.Context) error   { return nil }

func (s *scripted) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	l := s.log
	for {
		l.mu.Lock()
		if s.pos < len(l.items) {
			e := l.items[s.pos]
			if e.end {
				l.mu.Unlock()
				return message.Batch{}, nil, message.ErrEndOfInput
			}
			s.pos++
			l.waiting = -1
			l.mu.Unlock()
			s.wm, s.idle, s.started = e.wm, e.idle, true
			b := message.Batch{Messages: make([]message.Message, len(e.records))}
			for i, r := range e.records {
				b.Messages[i] = message.NewStructured(cloneJSON(r))
			}
			return b, message.NoopAck, nil
		}
		if l.waiting != s.pos {
			l.waiting = s.pos
			l.signal()
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return message.Batch{}, nil, ctx.Err()
		}
	}
}

// Clock is the watermark and idleness of the last emission read.
func (s *scripted) Clock() (int64, bool) {
	if !s.started {
		return operator.NoTime, false
	}
	return s.wm, s.idle
}

func (s *scripted) Position() ([]byte, error) { return json.Marshal(s.pos) }

func (s *scripted) Seek(_ context.Context, pos []byte) error {
	if err := json.Unmarshal(pos, &s.pos); err != nil {
		return err
	}
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	if s.pos < 0 || s.pos > len(s.log.items) {
		return fmt.Errorf("position %d is outside the script (%d items)", s.pos, len(s.log.items))
	}
	s.log.sought = s.pos
	return nil
}

// sinkStore is what a sink's instances committed, kept across restarts
// as an external system's committed data would be.
type sinkStore struct {
	mu        sync.Mutex // guards the fields below
	wake      chan struct{}
	prepared  map[string][]any // txn -> records
	committed []any
	done      map[string]bool  // committed txns
	open      map[string][]any // by instance: written since the last Prepare
	lastPrep  map[string]int64 // by instance of this attempt
	lastDone  map[string]int64 // by instance of this attempt
	seq       map[string]int   // by instance
	instances map[string]bool  // began in the current attempt
}

func newSinkStore() *sinkStore {
	return &sinkStore{
		wake: make(chan struct{}), prepared: map[string][]any{}, done: map[string]bool{},
		open: map[string][]any{}, lastPrep: map[string]int64{}, lastDone: map[string]int64{},
		seq: map[string]int{}, instances: map[string]bool{},
	}
}

func (s *sinkStore) signal() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// newAttempt forgets the instances of the attempt that ended.
func (s *sinkStore) newAttempt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.instances)
	clear(s.lastPrep)
	clear(s.lastDone)
}

// records are the committed records, in commit order.
func (s *sinkStore) records() []Got {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Got, len(s.committed))
	for i, r := range s.committed {
		out[i] = Got{Payload: canonical(r), Value: r, IsJSON: true}
	}
	return out
}

// committedUpTo waits until every instance of the attempt committed
// checkpoint id.
func (s *sinkStore) committedUpTo(ctx context.Context, id int64) error {
	for {
		s.mu.Lock()
		done := true
		for inst := range s.instances {
			if s.lastDone[inst] < id {
				done = false
			}
		}
		wake := s.wake
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return fmt.Errorf("the sinks did not commit checkpoint %d: %w", id, context.Cause(ctx))
		}
	}
}

type txnHandle struct {
	Instance   string `json:"instance"`
	Checkpoint int64  `json:"checkpoint"`
	Seq        int    `json:"seq"`
}

// txSink is one instance of a test sink: a two-phase-commit output whose
// committed records the test checks.
type txSink struct {
	s  *sinkStore
	id string
}

var _ component.Transactional = (*txSink)(nil)

func (t *txSink) Connect(context.Context) error { return nil }
func (t *txSink) Close(context.Context) error   { return nil }

func (t *txSink) Write(_ context.Context, b message.Batch) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for i := range b.Messages {
		v, err := b.Messages[i].Structured()
		if err != nil {
			p, _ := b.Messages[i].Payload()
			v = string(p)
		}
		t.s.open[t.id] = append(t.s.open[t.id], jsonValue(v))
	}
	return nil
}

func (t *txSink) Begin(ctx context.Context, op string, subtask int, restored [][]byte) error {
	t.id = op + "/" + strconv.Itoa(subtask)
	for _, txn := range restored {
		if err := t.Commit(ctx, txn); err != nil {
			return err
		}
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	// What this instance prepared and never committed is gone: the
	// restored checkpoint replays it.
	delete(t.s.open, t.id)
	for h := range t.s.prepared {
		var th txnHandle
		if json.Unmarshal([]byte(h), &th) == nil && th.Instance == t.id && !t.s.done[h] {
			delete(t.s.prepared, h)
		}
	}
	t.s.instances[t.id] = true
	t.s.signal()
	return nil
}

func (t *txSink) Prepare(_ context.Context, checkpoint int64) ([]byte, error) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.s.seq[t.id]++
	h, err := json.Marshal(txnHandle{Instance: t.id, Checkpoint: checkpoint, Seq: t.s.seq[t.id]})
	if err != nil {
		return nil, err
	}
	t.s.prepared[string(h)] = t.s.open[t.id]
	delete(t.s.open, t.id)
	t.s.lastPrep[t.id] = checkpoint
	return h, nil
}

func (t *txSink) Commit(_ context.Context, txn []byte) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	h := string(txn)
	var th txnHandle
	if err := json.Unmarshal(txn, &th); err != nil {
		return fmt.Errorf("not a test transaction: %w", err)
	}
	if !t.s.done[h] {
		recs, ok := t.s.prepared[h]
		if !ok {
			return fmt.Errorf("no prepared transaction %s", h)
		}
		t.s.done[h] = true
		delete(t.s.prepared, h)
		t.s.committed = append(t.s.committed, recs...)
	}
	if th.Instance == t.id && th.Checkpoint > t.s.lastDone[t.id] {
		t.s.lastDone[t.id] = th.Checkpoint
	}
	t.s.signal()
	return nil
}

// jsonValue is v as encoding/json decodes its encoding: the data model
// a test's expectations are written in (numbers are float64).
func jsonValue(v any) any {
	var out any
	if err := json.Unmarshal(canonical(v), &out); err != nil {
		return fmt.Sprintf("%v", v)
	}
	return out
}

// cloneJSON copies a JSON value so that nothing the kernel holds is
// shared with the test's script or its results.
func cloneJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = cloneJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneJSON(e)
		}
		return out
	}
	return v
}

// sortedKeys are m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
