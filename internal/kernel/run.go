package kernel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/state"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Recovery modes beyond the configuration's: none starts empty.
const (
	RecoverLatestCheckpoint = "latest_checkpoint"
	RecoverLatestSavepoint  = "latest_savepoint"
	RecoverFail             = "fail"
	RecoverNone             = "none"
	// RecoverNewest restores the newest checkpoint or savepoint: the one
	// the output committed so far is consistent with. Restarts use it.
	RecoverNewest = "newest"
	// RecoverArtifact restores exactly Options.Restore.
	RecoverArtifact = "artifact"
)

// Run runs the job until its sources end (Completed), ctx ends or Stop is
// called (Stopped), or it fails beyond recovery (Failed, with the error).
// A task failure restarts the job from its recovery artifact, while in
// state Recovering, as the plan's restart strategy allows; once it gives
// up the job is Failed with the strategy's reason and the last failure.
func (j *Job) Run(ctx context.Context) error {
	j.mu.Lock()
	if j.ran {
		j.mu.Unlock()
		return errors.New("kernel: Run called twice")
	}
	j.ran = true
	j.mu.Unlock()
	defer close(j.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-j.stopc:
			j.setState(Stopping, nil)
			cancel()
		case <-ctx.Done():
		}
	}()

	if sp := j.split; sp != nil {
		if !sp.coordinator() {
			return j.follow(ctx)
		}
		var wg sync.WaitGroup
		sctx, stopSessions := context.WithCancel(context.WithoutCancel(ctx))
		sp.start(sctx, &wg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sp.lead(sctx)
		}()
		defer func() {
			// Tell the followers how the job ended, then close the sessions.
			j.mu.Lock()
			m := ctlMsg{Type: msgEnd, State: j.st}
			if j.err != nil && j.st == Failed {
				m.Error = j.err.Error()
			}
			j.mu.Unlock()
			sp.broadcast(m)
			sp.flush(2 * time.Second)
			stopSessions()
			wg.Wait()
		}()
	}
	mode := j.opts.Recovery
	if mode == "" {
		mode = j.plan.Recovery
	}
	if mode == "" {
		mode = RecoverLatestCheckpoint
	}
	restart := newRestarter(j.plan.Restart)
	inst := j.first
	j.first = nil
	for tries := 0; ; tries++ {
		if ctx.Err() != nil {
			j.setState(Stopped, nil)
			return nil
		}
		if inst == nil {
			var err error
			if inst, err = j.construct(); err != nil {
				j.setState(Failed, err)
				return err
			}
		}
		restoreFrom := mode
		j.mu.Lock()
		committed := j.committed
		j.mu.Unlock()
		if tries > 0 && (committed || mode != RecoverArtifact && mode != RecoverNone) {
			// A restart resumes from the newest artifact of either kind: the
			// output committed so far is consistent with it and no other.
			// Until this job committed one, a start from a named artifact
			// or from empty state starts so again: the store's newest may
			// be another version's.
			restoreFrom = RecoverNewest
		}
		if sp := j.split; sp != nil {
			if err := sp.waitPeers(ctx); err != nil {
				inst.close()
				j.setState(Stopped, nil)
				return nil
			}
		}
		out, progressed, err := j.runAttempt(ctx, j.newAttempt(newEpoch(), nil), inst, restoreFrom)
		inst = nil
		switch out {
		case outCompleted:
			j.setState(Completed, nil)
			return nil
		case outStopped:
			j.setState(Stopped, nil)
			return nil
		}
		j.mu.Lock()
		j.lastErr = err
		j.mu.Unlock()
		if permanent(err) || mode == RecoverFail {
			j.setState(Failed, err)
			return err
		}
		pause, giveUp := restart.failed(j.opts.Now(), progressed)
		if giveUp != "" {
			err = fmt.Errorf("%s; the last failure: %w", giveUp, err)
			j.log.Error("job failed; not restarting", "error", err)
			j.setState(Failed, err)
			return err
		}
		j.log.Warn("job failed; restarting", "error", err, "backoff", pause)
		j.mu.Lock()
		j.restarts++
		j.mu.Unlock()
		if m := j.opts.Metrics; m != nil {
			m.restarts.WithLabelValues(j.plan.JobID).Inc()
		}
		j.setState(Recovering, err)
		if j.opts.sleep(ctx, pause) != nil {
			j.setState(Stopped, nil)
			return nil
		}
	}
}

func (j *Job) setState(s State, err error) {
	j.mu.Lock()
	if j.st == s && err == nil {
		j.mu.Unlock()
		return
	}
	if j.st == Stopping && s == Running {
		j.mu.Unlock()
		return
	}
	j.st = s
	if err != nil {
		j.err = err
	} else if s == Running || s == Completed || s == Stopped {
		j.err = nil
	}
	j.mu.Unlock()
	if j.opts.OnState != nil {
		j.opts.OnState(s)
	}
}

// permanentError is a failure a restart cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) bool {
	var pe *permanentError
	var be *BuildError
	var ie *state.IncompatibleError
	// A refusal by the node's remote policy at use stays a refusal on
	// restart.
	return errors.Is(err, state.ErrBudget) || errors.As(err, &pe) || errors.As(err, &be) || errors.As(err, &ie) ||
		errors.Is(err, sandbox.ErrDenied)
}

type outcome int

const (
	outFailed outcome = iota
	outCompleted
	outStopped
)

// attempt is one try at running the job: its tasks, channels and
// coordinator. An attempt ends when every task ended, one failed, or the
// job is stopped.
type attempt struct {
	j             *Job
	p             *job.Plan
	tasks         []*task
	sources       []*task
	checkpointing bool
	arts          *state.Artifacts
	nextID        int64

	cancel  context.CancelCauseFunc
	failMu  sync.Mutex // guards failErr: the split leader's goroutine, which outlives attempts, may fail one
	failErr error

	acks      chan taskAck
	ended     chan string
	over      chan struct{} // closed when the attempt is over
	assembled chan struct{} // closed once the tasks and channels exist

	// split placement (split nil otherwise)
	split       *splitRun
	epoch       uint64
	restoreRef  *ArtifactRef    // a follower restores what the coordinator chose
	taskTotal   int             // tasks of the plan, on every node
	sourceTotal int             // source tasks of the plan, on every node
	closers     []func()        // data-plane streams to close at the end
	waiting     map[string]bool // followers whose tasks have not finished; guarded by readyMu
	allDone     chan struct{}   // closed when waiting emptied

	wg         sync.WaitGroup // every goroutine but the tasks
	readyMu    sync.Mutex
	notReady   int
	progressed bool // a checkpoint completed; owned by the coordinator until the attempt ends
}

func (r *attempt) goroutine(f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

func (r *attempt) fail(err error) {
	r.failMu.Lock()
	first := r.failErr == nil
	if first {
		r.failErr = err
	}
	r.failMu.Unlock()
	if first {
		r.cancel(err)
	}
}

func (r *attempt) ready() {
	r.readyMu.Lock()
	r.notReady--
	all := r.notReady == 0
	r.readyMu.Unlock()
	if all {
		r.j.setState(Running, nil)
	}
}

// artifactPath is where task spec's files of barrier b go.
func (r *attempt) artifactPath(b barrier, spec job.Task) string {
	return strings.TrimSuffix(state.Prefix(r.p.JobID, b.kind(), b.id), "/") + "/" + spec.Chain + "/" + strconv.Itoa(spec.Subtask)
}

// stateFS is how the job's task directories are reached: through the
// job's FS when its state.root came with it (a Hub job's choice), plainly
// when they live under the node's own state root.
func (j *Job) stateFS() sandbox.FS {
	if s := j.plan.State; s != nil && s.Root != "" {
		return j.opts.FS
	}
	return sandbox.FS{}
}

// stateRoot is the directory the job's task stores live under.
func (j *Job) stateRoot() string {
	root := j.opts.StateRoot
	ns := j.plan.JobID
	if s := j.plan.State; s != nil {
		if s.Root != "" {
			root = s.Root
		}
		if s.Namespace != "" {
			ns = s.Namespace
		}
	}
	if root == "" {
		return ""
	}
	return filepath.Join(root, ns)
}

// newAttempt prepares an attempt: epoch names it on the data plane, ref is
// what a follower restores (the coordinator's choice).
func (j *Job) newAttempt(epoch uint64, ref *ArtifactRef) *attempt {
	p := j.plan
	r := &attempt{
		j: j, p: p,
		checkpointing: p.Checkpoint != nil,
		acks:          make(chan taskAck, len(p.Tasks)),
		ended:         make(chan string, len(p.Tasks)),
		over:          make(chan struct{}),
		assembled:     make(chan struct{}),
		nextID:        1,
		split:         j.split,
		epoch:         epoch,
		restoreRef:    ref,
		taskTotal:     len(p.Tasks),
	}
	for _, t := range p.Tasks {
		for _, c := range p.Chains {
			if c.ID == t.Chain && p.Operator(c.Operators[0]).Kind == "source" {
				r.sourceTotal++
			}
		}
	}
	return r
}

func (j *Job) runAttempt(ctx context.Context, r *attempt, inst *instances, mode string) (outcome, bool, error) {
	defer close(r.over)
	defer func() {
		for _, c := range r.closers {
			c()
		}
	}()
	restore, err := j.prepareRecovery(ctx, r, mode)
	if err == nil {
		err = j.assemble(r, inst, restore)
	}
	if err != nil {
		inst.close()
		if ctx.Err() != nil {
			return outStopped, false, nil
		}
		return outFailed, false, err
	}
	close(r.assembled)
	j.mu.Lock()
	j.tasks = r.tasks
	if restore != nil {
		j.restored = restore.Kind + " " + strconv.FormatInt(restore.ID, 10)
	}
	j.mu.Unlock()

	rctx, cancel := context.WithCancelCause(ctx)
	r.cancel = cancel
	defer cancel(nil)
	r.notReady = len(r.tasks)
	var tasks sync.WaitGroup
	for _, t := range r.tasks {
		tasks.Add(1)
		go func() {
			defer tasks.Done()
			if err := t.run(rctx); err != nil && rctx.Err() == nil {
				t.setStatus("failed")
				r.fail(fmt.Errorf("task %s: %w", t.spec.ID, err))
			}
		}()
	}
	lead := r.split != nil && r.split.coordinator()
	if lead {
		r.waiting, r.allDone = map[string]bool{}, make(chan struct{})
		for _, p := range r.split.peers {
			r.waiting[p] = true
		}
		if len(r.waiting) == 0 {
			// Every task landed here (one node left of a move, or split
			// placement over one node): no follower will report done.
			close(r.allDone)
		}
		r.split.setCurrent(r)
		defer r.split.setCurrent(nil)
		r.split.broadcast(ctlMsg{Type: msgStart, Epoch: r.epoch, Restore: refOf(restore)})
	}
	cctx, stopCoord := context.WithCancel(rctx)
	coordDone := make(chan struct{})
	go func() {
		defer close(coordDone)
		if r.split != nil && !lead {
			r.relay(cctx)
			return
		}
		newCoordinator(r).run(cctx)
	}()
	tasks.Wait()
	if lead {
		// The job is done when the followers' tasks are too.
		select {
		case <-r.allDone:
		case <-rctx.Done():
		}
	}
	stopCoord()
	<-coordDone
	cancel(errAttemptOver)
	r.wg.Wait()
	for _, t := range r.tasks {
		t.teardown()
	}
	r.failMu.Lock()
	failErr := r.failErr
	r.failMu.Unlock()
	if lead && (failErr != nil || ctx.Err() != nil) {
		r.split.broadcast(ctlMsg{Type: msgAbort, Epoch: r.epoch})
	}
	switch {
	case failErr != nil:
		return outFailed, r.progressed, failErr
	case ctx.Err() != nil:
		return outStopped, r.progressed, nil
	}
	return outCompleted, r.progressed, nil
}

var errAttemptOver = errors.New("the attempt is over")

// assemble creates the tasks of an attempt, their chained operators and the
// channels and data-plane streams between them.
func (j *Job) assemble(r *attempt, inst *instances, restore *state.Manifest) error {
	p := r.p
	root := j.stateRoot()
	chains := map[string]*job.Chain{}
	for i := range p.Chains {
		chains[p.Chains[i].ID] = &p.Chains[i]
	}
	// byChain holds a chain's tasks by subtask; nil where the task runs on
	// another node (split placement).
	byChain := map[string][]*task{}
	for _, c := range p.Chains {
		byChain[c.ID] = make([]*task, c.Parallelism)
	}
	maxPending := 4096
	if p.State != nil && p.State.MaxPendingTransactions > 0 {
		maxPending = p.State.MaxPendingTransactions
	}
	m := j.opts.Metrics
	for ti, spec := range p.Tasks {
		if !j.local(spec.ID) {
			continue
		}
		ch := chains[spec.Chain]
		t := &task{
			r: r, spec: spec, wm: operator.NoTime,
			control:    make(chan control, 64),
			commitWake: make(chan struct{}, 1),
			lastCommit: j.opts.Now(),
		}
		t.obsWM.Store(operator.NoTime)
		t.setStatus("created")
		if root != "" {
			t.dir = filepath.Join(root, spec.Chain, strconv.Itoa(spec.Subtask))
		}
		tin := inst.tasks[ti]
		for ci, id := range ch.Operators {
			pop := p.Operator(id)
			o := &chainOp{t: t, pop: pop, op: tin.ops[ci]}
			o.in = m.opCounter(func(m *Metrics) *prometheus.CounterVec { return m.recordsIn }, p.JobID, id)
			o.emt = m.opCounter(func(m *Metrics) *prometheus.CounterVec { return m.recordsOut }, p.JobID, id)
			o.lateDr = m.opCounter(func(m *Metrics) *prometheus.CounterVec { return m.lateDropped }, p.JobID, id)
			switch pop.Kind {
			case "source":
				t.src = o
				t.input = tin.input
				t.wmGen = newWatermarkGen(pop.Time, j.opts.Now().UnixMilli())
				t.dropped = m.opCounter(func(m *Metrics) *prometheus.CounterVec { return m.dropped }, p.JobID, id, "timestamp")
			case "sink":
				out := tin.output[ci]
				s := &sinkOp{id: id, subtask: spec.Subtask, out: out, maxPending: maxPending, now: j.opts.Now, sleep: j.opts.sleep}
				s.tx, _ = out.(component.Transactional)
				o.op, o.sink, o.output = s, s, out
				t.sinks = append(t.sinks, s)
			}
			if pop.Stateful {
				t.stateful = append(t.stateful, id)
			}
			t.ops = append(t.ops, o)
		}
		if len(t.stateful) > 0 && p.State != nil && t.dir == "" {
			return &permanentError{fmt.Errorf("%s: the job keeps state but no state root is set (state.root or SVC_STATE_ROOT)", j.prefix)}
		}
		r.tasks = append(r.tasks, t)
		byChain[spec.Chain][spec.Subtask] = t
		if t.src != nil {
			r.sources = append(r.sources, t)
		}
	}
	opOf := func(t *task, id string) *chainOp {
		for _, o := range t.ops {
			if o.pop.ID == id {
				return o
			}
		}
		return nil
	}
	for ei := range p.Edges {
		e := &p.Edges[ei]
		from, to := p.Operator(e.From), p.Operator(e.To)
		ups, downs := byChain[from.Chain], byChain[to.Chain]
		if e.Chained || from.Chain == to.Chain {
			// A late edge between two operators of one chain is a direct
			// call too: a channel would feed the task its own barriers.
			for _, t := range ups {
				if t == nil {
					continue
				}
				o, nx := opOf(t, e.From), opOf(t, e.To)
				if e.Mode == job.Late {
					o.late = append(o.late, nx)
				} else {
					o.next = append(o.next, nx)
				}
			}
			continue
		}
		pu, pd := len(ups), len(downs)
		outs := make([][]outlet, pu)
		for i := range outs {
			outs[i] = make([]outlet, pd)
		}
		for k, down := range downs {
			for i, up := range ups {
				if !connected(e.Mode, i, k, pu, pd) || up == nil && down == nil {
					continue
				}
				if down == nil {
					outs[i][k] = r.netOutlet(ei, e, i, k, to.Chain)
					continue
				}
				in := &input{feeds: opOf(down, e.To), release: make(chan struct{}, 1), wm: operator.NoTime}
				if up != nil {
					ch := make(chan element, channelCapacity)
					outs[i][k], in.ch = chanOutlet(ch), ch
				} else {
					rcv, err := r.netInlet(ei, e, i, k, from.Chain)
					if err != nil {
						return err
					}
					in.rcv = rcv
				}
				down.inputs = append(down.inputs, in)
			}
		}
		for i, t := range ups {
			if t == nil {
				continue
			}
			rt := &router{edge: e, outs: outs[i], bufs: make([][]operator.Record, pd), subtask: i, maxPar: p.MaxParallelism}
			if r.j.opts.Tracer != nil {
				rt.traced, rt.tcs = true, make([]*trace.SpanContext, pd)
			}
			for k := range outs[i] {
				if outs[i][k] != nil {
					rt.targets = append(rt.targets, k)
				}
			}
			if e.Mode == job.Partitioned {
				rt.key = inst.tasks[taskIndex(p, t.spec.ID)].keys[ei]
			}
			o := opOf(t, e.From)
			if e.Mode == job.Late {
				o.lateRt = append(o.lateRt, rt)
			} else {
				o.routers = append(o.routers, rt)
			}
			t.routers = append(t.routers, rt)
		}
	}
	if restore != nil {
		return j.assignRestore(r, restore)
	}
	return nil
}

func taskIndex(p *job.Plan, id string) int {
	for i := range p.Tasks {
		if p.Tasks[i].ID == id {
			return i
		}
	}
	return -1
}

// lowestWatermark is the minimum watermark over tasks that still run.
func lowestWatermark(tasks []*task) (int64, bool) {
	wm, ok := int64(math.MaxInt64), false
	for _, t := range tasks {
		if s, _ := t.status.Load().(string); s != "running" {
			continue
		}
		w := t.obsWM.Load()
		if w == operator.NoTime {
			continue
		}
		wm, ok = min(wm, w), true
	}
	return wm, ok
}
