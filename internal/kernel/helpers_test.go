package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/operator"
	"github.com/flowplane/flowplane/internal/state"
)

// --- plans ---------------------------------------------------------------

type opSpec struct {
	id, kind string
	par      int
	stateful bool
	time     *job.TimePolicy
	conf     map[string]any // source or sink component config
	typ      string         // input or output type
}

type edgeSpec struct {
	from, to, mode, key string
}

// makePlan builds a plan the way job.Build does for simple graphs: ops in
// topological order; a forward edge between equal parallelisms, the only
// output of its source and the only input of its target, is chained.
func makePlan(jobID string, maxPar int, ops []opSpec, edges []edgeSpec) *job.Plan {
	p := &job.Plan{JobID: jobID, Version: 1, MaxParallelism: maxPar, FormatVersion: 1, Recovery: RecoverLatestCheckpoint}
	idx := map[string]int{}
	for i, o := range ops {
		op := job.Operator{ID: o.id, Kind: o.kind, Parallelism: o.par, Stateful: o.stateful, Time: o.time}
		switch o.kind {
		case "source":
			op.Source = &config.Source{OperatorID: o.id, InputType: o.typ, Config: o.conf}
		case "sink":
			op.Sink = &config.Sink{OperatorID: o.id, OutputType: o.typ, Config: o.conf}
		}
		p.Operators = append(p.Operators, op)
		idx[o.id] = i
	}
	for i, e := range edges {
		mode := e.mode
		if mode == "" {
			mode = job.Forward
		}
		p.Edges = append(p.Edges, job.Edge{ID: e.from + "->" + e.to, From: e.from, To: e.to, Mode: mode, Key: e.key})
		p.Operators[idx[e.from]].Outputs = append(p.Operators[idx[e.from]].Outputs, i)
		p.Operators[idx[e.to]].Inputs = append(p.Operators[idx[e.to]].Inputs, i)
	}
	for i := range p.Edges {
		e := &p.Edges[i]
		from, to := &p.Operators[idx[e.From]], &p.Operators[idx[e.To]]
		e.Chained = e.Mode == job.Forward && from.Parallelism == to.Parallelism && degree(p, from.Outputs) == 1 && degree(p, to.Inputs) == 1
	}
	for i := range p.Operators {
		op := &p.Operators[i]
		chained := -1
		for _, e := range op.Inputs {
			if p.Edges[e].Chained {
				chained = e
			}
		}
		if chained >= 0 {
			from := &p.Operators[idx[p.Edges[chained].From]]
			op.Chain = from.Chain
			for c := range p.Chains {
				if p.Chains[c].ID == op.Chain {
					p.Chains[c].Operators = append(p.Chains[c].Operators, op.ID)
				}
			}
			continue
		}
		op.Chain = op.ID
		p.Chains = append(p.Chains, job.Chain{ID: op.ID, Operators: []string{op.ID}, Parallelism: op.Parallelism})
	}
	for _, c := range p.Chains {
		for s := 0; s < c.Parallelism; s++ {
			p.Tasks = append(p.Tasks, job.Task{ID: c.ID + "#" + strconv.Itoa(s), Chain: c.ID, Subtask: s, KeyGroups: job.RangeOf(s, c.Parallelism, maxPar)})
		}
	}
	return p
}

// withState gives p durable state under root and checkpoints to dir.
func withState(p *job.Plan, root, artifacts string, intervalMs int) *job.Plan {
	p.State = &config.JobState{Backend: "embedded_kv", Durability: "durable", Root: root, FormatVersion: 1, MaxPendingTransactions: 4096}
	p.Checkpoint = &config.Checkpoint{IntervalMs: intervalMs, Retention: 3, ObjectStoreURI: "file://" + artifacts}
	return p
}

// --- the sequence input: splittable, replayable ------------------------

// seqHooks let a test watch and steer seq inputs.
type seqHooks struct {
	reads    atomic.Int64 // batches read, every instance
	connects atomic.Int64
	pauseAt  atomic.Int64 // Read blocks once next >= pauseAt (0: never)
}

// seq yields {"k": "k<i mod keys>", "i": i, "ts": i} for i in [0, n) (n 0:
// unbounded); subtask s of p yields the i with i mod p = s.
type seq struct {
	n, keys, batch int64
	hooks          *seqHooks
	sub, subs      int64
	next           int64
	stall          bool // subtask 1 never yields a record
}

func (s *seq) Split(subtask, subtasks int) error {
	s.sub, s.subs = int64(subtask), int64(subtasks)
	s.next = s.sub
	return nil
}
func (s *seq) Connect(context.Context) error { s.hooks.connects.Add(1); return nil }
func (s *seq) Close(context.Context) error   { return nil }
func (s *seq) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if s.stall && s.sub == 1 {
		<-ctx.Done()
		return message.Batch{}, nil, ctx.Err()
	}
	if s.n > 0 && s.next >= s.n {
		return message.Batch{}, nil, message.ErrEndOfInput
	}
	for {
		if p := s.hooks.pauseAt.Load(); p == 0 || s.next < p {
			break
		}
		select {
		case <-ctx.Done():
			return message.Batch{}, nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	var b message.Batch
	for k := int64(0); k < s.batch && (s.n == 0 || s.next < s.n); k++ {
		if p := s.hooks.pauseAt.Load(); p > 0 && s.next >= p {
			break
		}
		i := s.next
		b.Messages = append(b.Messages, message.NewStructured(map[string]any{"k": "k" + strconv.FormatInt(i%s.keys, 10), "i": float64(i), "ts": float64(i)}))
		s.next += s.subs
	}
	s.hooks.reads.Add(1)
	return b, message.NoopAck, nil
}
func (s *seq) Position() ([]byte, error) { return json.Marshal(s.next) }
func (s *seq) Seek(_ context.Context, pos []byte) error {
	return json.Unmarshal(pos, &s.next)
}

var (
	_ component.Splittable = (*seq)(nil)
	_ component.Replayable = (*seq)(nil)
)

// plain is an input that is neither splittable nor replayable.
type plain struct{ component.Input }

// --- collecting outputs ---------------------------------------------------

// sinkStore is what outputs wrote, kept across attempts like files on disk.
type sinkStore struct {
	mu        sync.Mutex
	written   []any            // every Write of the plain output
	prepared  map[string][]any // txn handle -> values, transactional
	committed []any            // values of committed txns, in commit order
	done      map[string]bool  // committed txn handles
	open      map[string][]any // identity -> values written since the last Prepare
	block     chan struct{}    // when set, Write waits for it to close
	writes    atomic.Int64
}

func newSinkStore() *sinkStore {
	return &sinkStore{prepared: map[string][]any{}, done: map[string]bool{}, open: map[string][]any{}}
}

func (s *sinkStore) values(tx bool) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tx {
		return slices.Clone(s.committed)
	}
	return slices.Clone(s.written)
}

type collect struct {
	s *sinkStore
}

func (c *collect) Connect(context.Context) error { return nil }
func (c *collect) Close(context.Context) error   { return nil }
func (c *collect) Write(ctx context.Context, b message.Batch) error {
	if c.s.block != nil {
		select {
		case <-c.s.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.s.writes.Add(1)
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for i := range b.Messages {
		v, err := b.Messages[i].Structured()
		if err != nil {
			return err
		}
		c.s.written = append(c.s.written, v)
	}
	return nil
}

// txCollect is a two-phase-commit output over a sinkStore.
type txCollect struct {
	collect
	id  string
	seq int
}

func (c *txCollect) Write(ctx context.Context, b message.Batch) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for i := range b.Messages {
		v, err := b.Messages[i].Structured()
		if err != nil {
			return err
		}
		c.s.open[c.id] = append(c.s.open[c.id], v)
	}
	return nil
}

func (c *txCollect) Begin(ctx context.Context, op string, subtask int, restored [][]byte) error {
	c.id = op + "/" + strconv.Itoa(subtask)
	for _, t := range restored {
		if err := c.Commit(ctx, t); err != nil {
			return err
		}
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	delete(c.s.open, c.id)
	for h := range c.s.prepared {
		var t struct{ ID string }
		_ = json.Unmarshal([]byte(h), &t)
		if t.ID == c.id && !c.s.done[h] {
			delete(c.s.prepared, h)
		}
	}
	return nil
}

func (c *txCollect) Prepare(_ context.Context, checkpoint int64) ([]byte, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.seq++
	h, _ := json.Marshal(map[string]any{"ID": c.id, "cp": checkpoint, "seq": c.seq, "t": time.Now().UnixNano()})
	c.s.prepared[string(h)] = c.s.open[c.id]
	delete(c.s.open, c.id)
	return h, nil
}

func (c *txCollect) Commit(_ context.Context, txn []byte) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	h := string(txn)
	if c.s.done[h] {
		return nil
	}
	vals, ok := c.s.prepared[h]
	if !ok {
		return fmt.Errorf("no prepared transaction %s", h)
	}
	c.s.done[h] = true
	c.s.committed = append(c.s.committed, vals...)
	return nil
}

var _ component.Transactional = (*txCollect)(nil)

func testRegistry() *component.Registry {
	reg := component.NewRegistry()
	reg.RegisterInput(component.Spec{Name: "seq"}, func(conf map[string]any, _ component.Resources) (component.Input, error) {
		s := &seq{n: int64(conf["n"].(int)), keys: 10, batch: 10, hooks: conf["hooks"].(*seqHooks), subs: 1}
		if k, ok := conf["keys"].(int); ok {
			s.keys = int64(k)
		}
		if b, ok := conf["batch"].(int); ok {
			s.batch = int64(b)
		}
		s.stall, _ = conf["stall"].(bool)
		return s, nil
	})
	reg.RegisterInput(component.Spec{Name: "plain"}, func(conf map[string]any, _ component.Resources) (component.Input, error) {
		return plain{&seq{n: 1, keys: 1, batch: 1, hooks: &seqHooks{}, subs: 1}}, nil
	})
	reg.RegisterOutput(component.Spec{Name: "collect"}, func(conf map[string]any, _ component.Resources) (component.Output, error) {
		return &collect{s: conf["store"].(*sinkStore)}, nil
	})
	reg.RegisterOutput(component.Spec{Name: "txcollect"}, func(conf map[string]any, _ component.Resources) (component.Output, error) {
		return &txCollect{collect: collect{s: conf["store"].(*sinkStore)}}, nil
	})
	return reg
}

// --- operators ------------------------------------------------------------

type baseOp struct{}

func (baseOp) Open(context.Context, *operator.Context) error { return nil }
func (baseOp) OnWatermark(context.Context, int64, operator.Collector) error {
	return nil
}
func (baseOp) Snapshot(context.Context, int64) error { return nil }
func (baseOp) Commit(context.Context, int64) error   { return nil }
func (baseOp) Close(context.Context) error           { return nil }

// pass emits its input; with failed set it fails once (across attempts)
// at the first record after it saw a checkpoint commit.
type pass struct {
	baseOp
	committed bool
	failed    *atomic.Bool
}

func (p *pass) Commit(context.Context, int64) error {
	p.committed = true
	return nil
}

func (p *pass) Process(_ context.Context, in []operator.Record, out operator.Collector) error {
	for _, r := range in {
		if p.failed != nil && p.committed && p.failed.CompareAndSwap(false, true) {
			return errors.New("injected failure")
		}
		out.Emit(r)
	}
	return nil
}

// countOp counts records per key in its store table and emits
// {"k": key, "n": count}; a record whose key group its subtask does not own
// is an error.
type countOp struct {
	baseOp
	oc     *operator.Context
	tab    *state.Table
	counts map[string]int64
	dirty  map[string]bool
}

func (c *countOp) Open(_ context.Context, oc *operator.Context) error {
	c.oc, c.counts, c.dirty = oc, map[string]int64{}, map[string]bool{}
	if oc.Store == nil {
		return nil
	}
	c.tab = oc.Store.Table(oc.Operator.ID, "counts")
	return c.tab.Scan(oc.KeyGroups, func(_ int, key, value []byte) error {
		n, err := strconv.ParseInt(string(value), 10, 64)
		c.counts[string(key)] = n
		return err
	})
}

func (c *countOp) Process(_ context.Context, in []operator.Record, out operator.Collector) error {
	for i := range in {
		k := in[i].Data().(map[string]any)["k"].(string)
		kg := job.KeyGroup([]byte(k), c.oc.Plan.MaxParallelism)
		if !c.oc.KeyGroups.Contains(kg) {
			return fmt.Errorf("key %s (group %d) reached subtask %d owning %v", k, kg, c.oc.Subtask, c.oc.KeyGroups)
		}
		c.counts[k]++
		c.dirty[k] = true
		out.Emit(operator.Record{Value: map[string]any{"k": k, "n": float64(c.counts[k]), "sub": float64(c.oc.Subtask)}, Time: in[i].Time})
	}
	return nil
}

func (c *countOp) Snapshot(context.Context, int64) error {
	if c.tab == nil {
		return nil
	}
	for k := range c.dirty {
		if err := c.tab.Put(job.KeyGroup([]byte(k), c.oc.Plan.MaxParallelism), []byte(k), strconv.AppendInt(nil, c.counts[k], 10)); err != nil {
			return err
		}
	}
	clear(c.dirty)
	return nil
}

// fieldKey is the key expression "k" of the test records.
type fieldKey struct{}

func (fieldKey) Eval(r *operator.Record, dst []byte) ([]byte, any, error) {
	m, ok := r.Data().(map[string]any)
	if !ok {
		return nil, nil, errors.New("not an object")
	}
	return job.AppendCanonicalKey(dst, m["k"]), m["k"], nil
}

// testOptions wires the test registry, operators by id prefix and an
// instant backoff.
func testOptions(ops map[string]func() operator.Operator) Options {
	return Options{
		Registry: testRegistry(),
		newOperator: func(op *job.Operator) (operator.Operator, error) {
			f, ok := ops[op.ID]
			if !ok {
				return nil, fmt.Errorf("no test operator %q", op.ID)
			}
			return f(), nil
		},
		newKey: func(expr string) (keyer, error) {
			if expr != "k" {
				return nil, fmt.Errorf("unknown key %q", expr)
			}
			return fieldKey{}, nil
		},
		sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		tick:  5 * time.Millisecond,
	}
}

// runJob runs j in the background; wait returns Run's error (bounded).
func runJob(t *testing.T, j *Job) (wait func() error, cancel context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- j.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-errc:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			select {
			case err = <-errc:
			case <-time.After(60 * time.Second):
				err = errors.New("Run did not return within 60s")
			}
			errc <- err
		})
		return err
	}, cancel
}

// eventually polls cond until it holds, failing after 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type atomicErr struct{ atomic.Value }
type atomicInt struct{ atomic.Int64 }

// degree counts the edges that are not late.
func degree(p *job.Plan, edges []int) int {
	n := 0
	for _, e := range edges {
		if p.Edges[e].Mode != job.Late {
			n++
		}
	}
	return n
}
