package testsuite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/kernel"
	"github.com/flowplane/flowplane/internal/operator"
)

// testCheckpointIntervalMs is the checkpoint interval of a job under test:
// a day, so that checkpoints happen only where the test takes them (its
// checkpoint, expect and restart steps).
const testCheckpointIntervalMs = 24 * 60 * 60 * 1000

// virtualNow is the processing time of a job under test: fixed, so that a
// processing-time record's stamp does not depend on when the test runs.
var virtualNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// jobRun is one job case in progress.
type jobRun struct {
	c       Case
	prefix  string
	plan    *job.Plan
	opts    kernel.Options
	sources map[string]*sourceLog
	sinks   map[string]*sinkStore
	logf    func(format string, args ...any)

	j     *kernel.Job
	done  chan struct{} // closed when the attempt's Run returned
	err   error         // Run's error, once done
	ended bool
}

// runJob runs a job case's steps against the real kernel.
func runJob(ctx context.Context, cfg *config.Config, c Case, dir string, logf func(string, ...any)) ([]string, error) {
	idx, err := jobIndex(cfg, c)
	if err != nil {
		return nil, err
	}
	jc := cfg.Jobs[idx]
	prefix := fmt.Sprintf("jobs[%d]", idx)
	// A source runs as one subtask: the test's records are one sequence.
	jc.Operators = slices.Clone(jc.Operators)
	for i := range jc.Operators {
		if jc.Operators[i].Kind == "source" {
			jc.Operators[i].Parallelism = 1
		}
	}
	plan, ps := job.Build(prefix, jc)
	if len(ps) > 0 {
		return nil, problemsError(ps)
	}
	r := &jobRun{c: c, prefix: prefix, plan: plan, sources: map[string]*sourceLog{}, sinks: map[string]*sinkStore{}, logf: logf}
	for i := range plan.Operators {
		op := &plan.Operators[i]
		switch {
		case op.Source != nil:
			l := newSourceLog()
			r.sources[op.ID] = l
			op.Source = &config.Source{OperatorID: op.ID, InputType: sourceType, Config: map[string]any{"log": l}, Time: op.Source.Time}
		case op.Sink != nil:
			s := newSinkStore()
			r.sinks[op.ID] = s
			op.Sink = &config.Sink{OperatorID: op.ID, OutputType: sinkType, Config: map[string]any{"store": s}}
		}
	}
	if plan.State != nil {
		st := *plan.State
		st.Root, st.Namespace = filepath.Join(dir, "state"), ""
		plan.State = &st
	}
	plan.Checkpoint = &config.Checkpoint{IntervalMs: testCheckpointIntervalMs, Retention: 3, ObjectStoreURI: "file://" + filepath.ToSlash(filepath.Join(dir, "artifacts"))}
	r.opts = kernel.Options{
		Registry:  harnessRegistry(),
		Logger:    slog.New(slog.DiscardHandler),
		StateRoot: filepath.Join(dir, "state"),
		Now:       func() time.Time { return virtualNow },
		Spec:      &jc,
	}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	defer r.stop(context.WithoutCancel(ctx))
	var fails []string
	for _, s := range c.Steps {
		f, err := r.step(ctx, s)
		if err != nil {
			return fails, fmt.Errorf("%s (%s): %w", s.Path, s.Kind(), err)
		}
		fails = append(fails, f...)
	}
	return fails, nil
}

func jobIndex(cfg *config.Config, c Case) (int, error) {
	var ids []string
	for i, j := range cfg.Jobs {
		if j.ID == c.Job || c.Job == "" && len(cfg.Jobs) == 1 {
			return i, nil
		}
		ids = append(ids, j.ID)
	}
	if c.Job == "" {
		return 0, fmt.Errorf("%s: the configuration has %d jobs: name one with job", c.Path, len(cfg.Jobs))
	}
	msg := fmt.Sprintf("%s.job: no job %q in the configuration", c.Path, c.Job)
	if s := component.Suggest(c.Job, ids); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return 0, errors.New(msg)
}

// start builds the job from the plan and runs it: at a restart, from the
// same state root and artifact store, so the kernel recovers as it does on
// a node.
func (r *jobRun) start(ctx context.Context) error {
	j, err := kernel.Build(r.prefix, r.plan, r.opts)
	if err != nil {
		return err
	}
	r.j, r.done, r.err = j, make(chan struct{}), nil
	done := r.done
	go func() {
		err := j.Run(context.WithoutCancel(ctx))
		r.err = err
		close(done)
	}()
	return nil
}

// stop stops the running attempt, if any, and waits for it.
func (r *jobRun) stop(ctx context.Context) {
	if r.j == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, _ = r.j.Stop(ctx, kernel.StopOptions{})
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	_ = r.j.Close()
	r.j = nil
}

// failed is the job's failure once its Run returned early.
func (r *jobRun) failed() error {
	o := r.j.Observe()
	if r.err != nil {
		return fmt.Errorf("the job ended %s: %w", o.State, r.err)
	}
	return fmt.Errorf("the job ended %s %s", o.State, o.Error)
}

func (r *jobRun) step(ctx context.Context, s Step) ([]string, error) {
	if r.ended && s.Expect == nil {
		return nil, errors.New("the job has ended: only expect steps may follow end")
	}
	switch {
	case s.Send != nil:
		for _, src := range sortedKeys(s.Send) {
			l, err := r.source(src)
			if err != nil {
				return nil, err
			}
			for i, rec := range s.Send[src] {
				if _, ok := rec.(map[string]any); !ok {
					return nil, fmt.Errorf("%s[%d]: a record is an object, got %s", src, i, kindOf(rec))
				}
			}
			l.add(emission{records: s.Send[src]})
		}
	case s.Watermark != nil:
		for _, src := range sortedKeys(s.Watermark) {
			l, err := r.source(src)
			if err != nil {
				return nil, err
			}
			l.add(emission{wm: s.Watermark[src]})
		}
	case s.Idle != nil:
		for _, src := range s.Idle {
			l, err := r.source(src)
			if err != nil {
				return nil, err
			}
			l.add(emission{idle: true, wm: operator.NoTime})
		}
	case s.Checkpoint:
		id, err := r.checkpoint(ctx)
		if err != nil {
			return nil, err
		}
		r.logf("checkpoint %d completed", id)
	case s.Restart:
		return nil, r.restart(ctx)
	case s.End:
		return nil, r.end(ctx)
	default:
		return r.expect(ctx, s)
	}
	return nil, nil
}

func (r *jobRun) source(id string) (*sourceLog, error) {
	if l, ok := r.sources[id]; ok {
		return l, nil
	}
	return nil, unknownOperator("source", id, sortedKeys(r.sources))
}

func unknownOperator(kind, id string, known []string) error {
	msg := fmt.Sprintf("no %s operator %q in the job (%s)", kind, id, strings.Join(known, ", "))
	if s := component.Suggest(id, known); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return errors.New(msg)
}

// drain waits until every source task took every record and clock change
// given so far.
func (r *jobRun) drain(ctx context.Context) error {
	for _, id := range sortedKeys(r.sources) {
		l := r.sources[id]
		l.add(emission{wm: operator.NoTime}) // the filler drained waits behind
		dctx, cancel := r.whileRunning(ctx)
		err := l.drained(dctx)
		cancel()
		if err != nil {
			if isClosed(r.done) {
				return r.failed()
			}
			return err
		}
	}
	return nil
}

// checkpoint takes a checkpoint once the sources took everything, so that
// it covers every step before it, and waits until the sinks committed it.
func (r *jobRun) checkpoint(ctx context.Context) (int64, error) {
	if err := r.drain(ctx); err != nil {
		return 0, err
	}
	m, err := r.j.Checkpoint(ctx)
	if err != nil {
		if isClosed(r.done) {
			return 0, r.failed()
		}
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	for _, id := range sortedKeys(r.sinks) {
		cctx, cancel := r.whileRunning(ctx)
		err := r.sinks[id].committedUpTo(cctx, m.ID)
		cancel()
		if err != nil {
			if isClosed(r.done) {
				return 0, r.failed()
			}
			return 0, err
		}
	}
	return m.ID, nil
}

// restart stops the kernel where it is (what the sources handed over
// since the last checkpoint is lost with it) and builds it again: it
// restores the last checkpoint, and its sources replay from the positions
// recorded there.
func (r *jobRun) restart(ctx context.Context) error {
	if err := r.drain(ctx); err != nil {
		return err
	}
	last := r.j.Observe().LastCheckpoint
	r.stop(ctx)
	for _, l := range r.sources {
		l.restarted()
	}
	for _, s := range r.sinks {
		s.newAttempt()
	}
	if err := r.start(ctx); err != nil {
		return err
	}
	if err := r.drain(ctx); err != nil {
		return err
	}
	from := r.j.Observe().RestoredFrom
	if last > 0 && from != fmt.Sprintf("checkpoint %d", last) {
		return fmt.Errorf("the job restored %q, want checkpoint %d", from, last)
	}
	if from == "" {
		from = "nothing (no checkpoint yet)"
	}
	var replays []string
	for _, id := range sortedKeys(r.sources) {
		replays = append(replays, fmt.Sprintf("source %s read again %d records after the checkpoint", id, r.sources[id].replayed()))
	}
	r.logf("restarted: restored %s; %s", from, strings.Join(replays, ", "))
	return nil
}

// end ends every source and waits for the job to complete: the final
// watermark fires what is left, and a final checkpoint commits it.
func (r *jobRun) end(ctx context.Context) error {
	for _, id := range sortedKeys(r.sources) {
		r.sources[id].add(emission{end: true})
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return fmt.Errorf("the job did not complete: %w", context.Cause(ctx))
	}
	if o := r.j.Observe(); o.State != kernel.Completed {
		return r.failed()
	}
	r.ended = true
	return nil
}

// expect checks the committed output of the sinks it names, as of a
// checkpoint taken now (or the job's end).
func (r *jobRun) expect(ctx context.Context, s Step) ([]string, error) {
	if !r.ended {
		if _, err := r.checkpoint(ctx); err != nil {
			return nil, err
		}
	}
	var fails []string
	for _, id := range sortedKeys(s.Expect) {
		st, ok := r.sinks[id]
		if !ok {
			return nil, unknownOperator("sink", id, sortedKeys(r.sinks))
		}
		fails = append(fails, compareUnordered(s.Path+".expect."+id, s.Expect[id], st.records())...)
	}
	return fails, nil
}

// whileRunning is ctx, also cancelled when the attempt's Run returns.
func (r *jobRun) whileRunning(ctx context.Context) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancel(ctx)
	done := r.done
	go func() {
		select {
		case <-done:
			cancel()
		case <-cctx.Done():
		}
	}()
	return cctx, cancel
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
