package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flowplane/flowplane/internal/state"
	"github.com/prometheus/client_golang/prometheus"
)

// finalAttempts is how often the checkpoint at the end of input is tried
// before the attempt fails (and the job recovers).
const finalAttempts = 3

type trigger struct {
	savepoint bool
	reply     chan triggerResult // buffered(1)
}

type triggerResult struct {
	m   *state.Manifest
	err error
}

// pending is the checkpoint in flight.
type pending struct {
	b       barrier
	started time.Time
	acks    map[string]taskAck
	waiters []*trigger
	final   bool
	timer   *time.Timer
}

// coordinator injects barriers, collects the tasks' acknowledgements,
// commits manifests and tells the tasks to commit. One checkpoint is in
// flight at a time. Its fields are owned by its goroutine.
type coordinator struct {
	r      *attempt
	j      *Job
	cur    *pending
	queue  []*trigger
	ended  map[string]bool
	final  bool // every source ended: the next checkpoint is the final one
	done   bool // finish was sent
	finals int
}

func newCoordinator(r *attempt) *coordinator {
	return &coordinator{r: r, j: r.j, ended: map[string]bool{}}
}

func (c *coordinator) timeout() time.Duration {
	if c.j.opts.ckptTimeout > 0 {
		return c.j.opts.ckptTimeout
	}
	d := 10 * time.Duration(c.r.p.Checkpoint.IntervalMs) * time.Millisecond
	return min(max(d, time.Minute), 10*time.Minute)
}

func (c *coordinator) run(ctx context.Context) {
	var tick <-chan time.Time
	if c.r.checkpointing && c.r.p.Checkpoint.IntervalMs > 0 {
		t := time.NewTicker(time.Duration(c.r.p.Checkpoint.IntervalMs) * time.Millisecond)
		defer t.Stop()
		tick = t.C
	}
	lag := time.NewTicker(time.Second)
	defer lag.Stop()
	defer func() {
		err := context.Cause(ctx)
		if c.cur != nil {
			c.cur.timer.Stop()
			for _, w := range c.cur.waiters {
				w.reply <- triggerResult{err: err}
			}
		}
		for _, w := range c.queue {
			w.reply <- triggerResult{err: err}
		}
	}()
	for {
		var timeout <-chan time.Time
		if c.cur != nil {
			timeout = c.cur.timer.C
		}
		select {
		case <-tick:
			if c.cur == nil && !c.final && !c.done {
				c.start(ctx, false, nil)
			}
		case t := <-c.j.triggers:
			switch {
			case c.done || c.final:
				t.reply <- triggerResult{err: ErrNotRunning}
			case c.cur == nil:
				c.start(ctx, t.savepoint, t)
			default:
				c.queue = append(c.queue, t)
			}
		case a := <-c.r.acks:
			c.onAck(ctx, a)
		case <-timeout:
			c.abandon(ctx, fmt.Errorf("%s %d timed out after %v", c.cur.b.kind(), c.cur.b.id, c.timeout()))
		case id := <-c.r.ended:
			c.ended[id] = true
			if len(c.ended) == c.r.sourceTotal {
				c.final = true
				c.next(ctx)
			}
		case <-lag.C:
			if wm, ok := lowestWatermark(c.r.tasks); ok {
				c.j.opts.Metrics.setGauge(func(m *Metrics) *prometheus.GaugeVec { return m.wmLag }, c.r.p.JobID,
					float64(c.j.opts.Now().UnixMilli()-wm))
			}
		case <-ctx.Done():
			return
		}
	}
}

// start injects barrier id into every source.
func (c *coordinator) start(ctx context.Context, savepoint bool, t *trigger) {
	b := barrier{id: c.r.nextID, savepoint: savepoint}
	c.r.nextID++
	c.cur = &pending{b: b, started: c.j.opts.Now(), acks: map[string]taskAck{}, final: c.final, timer: time.NewTimer(c.timeout())}
	if t != nil {
		c.cur.waiters = append(c.cur.waiters, t)
	}
	for _, s := range c.r.sources {
		select {
		case s.control <- control{kind: ctlBarrier, b: b}:
		case <-ctx.Done():
			return
		}
	}
	c.r.remoteBarrier(b)
}

// next starts what is due once no checkpoint is in flight: a queued
// request, else the final checkpoint, else finish.
func (c *coordinator) next(ctx context.Context) {
	if c.cur != nil || c.done {
		return
	}
	if len(c.queue) > 0 && !c.final {
		t := c.queue[0]
		c.queue = c.queue[1:]
		c.start(ctx, t.savepoint, t)
		return
	}
	if !c.final {
		return
	}
	for _, t := range c.queue {
		t.reply <- triggerResult{err: ErrNotRunning}
	}
	c.queue = nil
	if c.r.checkpointing {
		c.start(ctx, false, nil)
		return
	}
	c.finish(ctx)
}

func (c *coordinator) finish(ctx context.Context) {
	c.done = true
	for _, s := range c.r.sources {
		select {
		case s.control <- control{kind: ctlFinish}:
		case <-ctx.Done():
			return
		}
	}
	c.r.remoteFinish()
}

func (c *coordinator) onAck(ctx context.Context, a taskAck) {
	if c.cur == nil || a.id != c.cur.b.id {
		return // a late acknowledgement of an abandoned checkpoint
	}
	if a.err != nil {
		c.abandon(ctx, fmt.Errorf("task %s: %w", a.task, a.err))
		return
	}
	c.cur.acks[a.task] = a
	if len(c.cur.acks) == c.r.taskTotal {
		c.complete(ctx)
	}
}

func (c *coordinator) abandon(ctx context.Context, err error) {
	cur := c.cur
	c.cur = nil
	cur.timer.Stop()
	c.j.log.Warn("checkpoint abandoned", "id", cur.b.id, "kind", cur.b.kind(), "error", err)
	c.j.mu.Lock()
	c.j.ckptFails++
	c.j.mu.Unlock()
	if m := c.j.opts.Metrics; m != nil {
		m.ckptFailures.WithLabelValues(c.r.p.JobID).Inc()
	}
	for _, w := range cur.waiters {
		w.reply <- triggerResult{err: err}
	}
	if cur.final {
		c.finals++
		if c.finals >= finalAttempts {
			c.r.fail(fmt.Errorf("the checkpoint at the end of input failed %d times: %w", c.finals, err))
			return
		}
	}
	c.next(ctx)
}

// complete writes the manifest (the commit point), then lets every task
// commit, then applies retention.
func (c *coordinator) complete(ctx context.Context) {
	cur := c.cur
	p := c.r.p
	m := &state.Manifest{
		Kind: cur.b.kind(), ID: cur.b.id, JobID: p.JobID, JobVersion: p.Version,
		FormatVersion: p.FormatVersion, MaxParallelism: p.MaxParallelism,
		CreatedAt: c.j.opts.Now().UTC(),
		Tasks:     []state.TaskArtifact{}, Sources: []state.SourcePosition{}, Sinks: []state.SinkTxn{},
	}
	for _, op := range p.Operators {
		m.Operators = append(m.Operators, op.ID)
	}
	var stateBytes int64
	for _, t := range p.Tasks { // every task, on every node
		a := cur.acks[t.ID]
		if a.artifact != nil {
			m.Tasks = append(m.Tasks, *a.artifact)
			m.Bytes += a.artifact.Bytes
		}
		m.Sources = append(m.Sources, a.positions...)
		m.Sinks = append(m.Sinks, a.txns...)
		stateBytes += a.stateBytes
	}
	// The fence is read before the commit point: once a newer placement
	// took the job over, this run commits no more output.
	if err := c.r.arts.Fence(ctx, p.JobID, c.j.opts.FenceGeneration); err != nil {
		if errors.Is(err, state.ErrFenced) {
			c.j.log.Error("job fenced: a newer placement took it over", "error", err)
			for _, w := range cur.waiters {
				w.reply <- triggerResult{err: err}
			}
			cur.waiters = nil
			c.r.fail(&permanentError{err})
			c.cur = nil
			cur.timer.Stop()
			return
		}
		c.abandon(ctx, fmt.Errorf("check the fence: %w", err))
		return
	}
	if err := c.r.arts.Commit(ctx, m); err != nil {
		c.abandon(ctx, fmt.Errorf("commit manifest: %w", err))
		return
	}
	c.cur = nil
	cur.timer.Stop()
	c.r.progressed = true
	dur := c.j.opts.Now().Sub(cur.started).Milliseconds()
	c.j.mu.Lock()
	c.j.lastCkpt = m.ID
	c.j.committed = true
	c.j.ckptDurMs = dur
	c.j.stBytes = stateBytes
	c.j.mu.Unlock()
	c.j.opts.Metrics.setGauge(func(m *Metrics) *prometheus.GaugeVec { return m.ckptDuration }, p.JobID, float64(dur))
	c.j.opts.Metrics.setGauge(func(m *Metrics) *prometheus.GaugeVec { return m.stateBytes }, p.JobID, float64(stateBytes))
	for _, t := range c.r.tasks {
		if t.commitUpTo.Load() < m.ID {
			t.commitUpTo.Store(m.ID)
		}
		select {
		case t.commitWake <- struct{}{}:
		default:
		}
	}
	c.r.remoteCommit(m.ID)
	c.retain(ctx, m)
	for _, w := range cur.waiters {
		w.reply <- triggerResult{m: m}
	}
	if cur.final {
		c.finish(ctx)
		return
	}
	c.next(ctx)
}

// retain deletes the checkpoints retention lets go: all but the newest
// retention, except those a listed sink transaction was prepared at; then
// the files of incomplete artifacts. Savepoints are never deleted here.
func (c *coordinator) retain(ctx context.Context, m *state.Manifest) {
	p := c.r.p
	pinned := map[int64]bool{}
	for _, s := range m.Sinks {
		pinned[s.Checkpoint] = true
	}
	cps, err := c.r.arts.List(ctx, p.JobID, state.KindCheckpoint)
	if err != nil {
		c.j.log.Warn("retention: list checkpoints", "error", err)
		return
	}
	keep := max(p.Checkpoint.Retention, 1)
	for _, old := range state.Expired(cps, keep, pinned) {
		if old.ID == m.ID || slices.Contains([]string{state.KindSavepoint}, old.Kind) {
			continue
		}
		if err := c.r.arts.Delete(ctx, p.JobID, state.KindCheckpoint, old.ID); err != nil {
			c.j.log.Warn("retention: delete checkpoint", "id", old.ID, "error", err)
		}
	}
	if err := c.r.arts.CleanIncomplete(ctx, p.JobID); err != nil {
		c.j.log.Warn("retention: clean incomplete artifacts", "error", err)
	}
}
