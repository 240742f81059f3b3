package kernel

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// lateOp emits the records whose i is not a multiple of 10 and sends the
// others to the late route; it checks its watermarks never go back and
// that the last one before Close is math.MaxInt64.
type lateOp struct {
	baseOp
	last   int64
	closed *atomic.Int64 // instances closed after the final watermark
	bad    *atomic.Value
}

func (l *lateOp) Process(_ context.Context, in []operator.Record, out operator.Collector) error {
	for _, r := range in {
		if int(r.Data().(map[string]any)["i"].(float64))%10 == 0 {
			out.EmitLate(r)
		} else {
			out.Emit(r)
		}
	}
	return nil
}

func (l *lateOp) OnWatermark(_ context.Context, wm int64, _ operator.Collector) error {
	if wm <= l.last {
		l.bad.Store(errors.New("watermark went back"))
	}
	l.last = wm
	return nil
}

func (l *lateOp) Close(context.Context) error {
	if l.last == math.MaxInt64 {
		l.closed.Add(1)
	}
	return nil
}

func TestLateRouteEventTimeAndMetrics(t *testing.T) {
	main, late := newSinkStore(), newSinkStore()
	tp := &job.TimePolicy{Mode: "event_time", TimestampField: "ts", Strategy: "bounded_out_of_orderness", OutOfOrdernessMs: 5, LatePolicy: "route", LateRoute: "route"}
	p := makePlan("late", 16, []opSpec{
		{id: "src", kind: "source", par: 2, typ: "seq", time: tp, conf: map[string]any{"n": 1000, "hooks": &seqHooks{}}},
		{id: "win", kind: "window", par: 2, time: tp},
		{id: "out", kind: "sink", par: 2, typ: "collect", conf: map[string]any{"store": main}},
		{id: "route", kind: "map", par: 1},
		{id: "lateout", kind: "sink", par: 1, typ: "collect", conf: map[string]any{"store": late}},
	}, []edgeSpec{
		{from: "src", to: "win", mode: job.Partitioned, key: "k"},
		{from: "win", to: "out"},
		{from: "win", to: "route", mode: job.Late},
		{from: "route", to: "lateout"},
	})
	var closed atomic.Int64
	var bad atomic.Value
	opts := testOptions(map[string]func() operator.Operator{
		"win":   func() operator.Operator { return &lateOp{last: operator.NoTime, closed: &closed, bad: &bad} },
		"route": func() operator.Operator { return &pass{} },
	})
	reg := prometheus.NewRegistry()
	opts.Metrics = NewMetrics(reg)
	j, err := Build("jobs[0]", p, opts)
	if err != nil {
		t.Fatal(err)
	}
	wait, _ := runJob(t, j)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	var wantMain, wantLate []int
	for i := 0; i < 1000; i++ {
		if i%10 == 0 {
			wantLate = append(wantLate, i)
		} else {
			wantMain = append(wantMain, i)
		}
	}
	if diff := cmp.Diff(wantMain, ints(main.values(false), "i")); diff != "" {
		t.Errorf("main output (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantLate, ints(late.values(false), "i")); diff != "" {
		t.Errorf("late output (-want +got):\n%s", diff)
	}
	if err, _ := bad.Load().(error); err != nil {
		t.Error(err)
	}
	if closed.Load() != 2 {
		t.Errorf("%d window subtasks saw the final watermark before Close, want 2", closed.Load())
	}
	m := opts.Metrics
	for _, c := range []struct {
		v    *prometheus.CounterVec
		op   string
		want float64
	}{
		{m.recordsIn, "win", 1000},
		{m.recordsOut, "win", 900},
		{m.recordsIn, "route", 100},
		{m.recordsIn, "out", 900},
	} {
		var d dto.Metric
		if err := c.v.WithLabelValues("late", c.op).Write(&d); err != nil {
			t.Fatal(err)
		}
		if got := d.GetCounter().GetValue(); got != c.want {
			t.Errorf("%s of %s = %v, want %v", "records", c.op, got, c.want)
		}
	}
}
