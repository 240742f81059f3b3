package operator_test

import (
	"context"
	"time"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
)

// collect is a Collector that keeps what it is given.
type collect struct {
	out, late []operator.Record
}

func (c *collect) Emit(r operator.Record)     { c.out = append(c.out, r) }
func (c *collect) EmitLate(r operator.Record) { c.late = append(c.late, r) }

// clock is an injected processing-time clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) advance(d time.Duration) { c.now = c.now.Add(d) }

// tb is what the harness needs of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// harness runs one operator instance the way a task does.
type harness struct {
	t       tb
	op      operator.Operator
	oc      *operator.Context
	out     collect
	dropped int
}

// start builds op with New and opens it with a memory-only context
// (plan changes the plan it sees; nil keeps a default one).
func start(t tb, op *job.Operator, plan *job.Plan, clk *clock) *harness {
	t.Helper()
	if clk == nil {
		clk = &clock{now: time.UnixMilli(1_000_000)}
	}
	return startWith(t, op, &operator.Context{Plan: plan, Now: clk.Now})
}

// startWith builds op with New and opens it with oc, whose Plan (default
// max_parallelism 128), Operator, KeyGroups (default all) and LateDropped
// it fills in when unset.
func startWith(t tb, op *job.Operator, oc *operator.Context) *harness {
	t.Helper()
	o, err := operator.New(op)
	if err != nil {
		t.Fatal(err)
	}
	if oc.Plan == nil {
		oc.Plan = &job.Plan{MaxParallelism: 128}
	}
	if oc.KeyGroups == (job.Range{}) {
		oc.KeyGroups = job.Range{Start: 0, End: oc.Plan.MaxParallelism - 1}
	}
	oc.Operator = op
	h := &harness{t: t, op: o, oc: oc}
	oc.LateDropped = func(n int) { h.dropped += n }
	if err := o.Open(context.Background(), oc); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) process(in ...operator.Record) error {
	return h.op.Process(context.Background(), in, &h.out)
}

func (h *harness) mustProcess(in ...operator.Record) {
	h.t.Helper()
	if err := h.process(in...); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) watermark(wm int64) {
	h.t.Helper()
	if err := h.op.OnWatermark(context.Background(), wm, &h.out); err != nil {
		h.t.Fatal(err)
	}
}

// take returns and forgets what was emitted so far.
func (h *harness) take() []operator.Record {
	out := h.out.out
	h.out.out = nil
	return out
}

func rec(t int64, v any) operator.Record { return operator.Record{Value: v, Time: t} }

func obj(kv ...any) map[string]any {
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}
