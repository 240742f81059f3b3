package kernel

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/operator"
	"github.com/google/go-cmp/cmp"
)

// recorder records what a task calls on it.
type recorder struct {
	baseOp
	wms       []int64
	records   int
	snapshots []int64
}

func (r *recorder) Process(_ context.Context, in []operator.Record, out operator.Collector) error {
	r.records += len(in)
	for _, x := range in {
		out.Emit(x)
	}
	return nil
}
func (r *recorder) OnWatermark(_ context.Context, wm int64, _ operator.Collector) error {
	r.wms = append(r.wms, wm)
	return nil
}
func (r *recorder) Snapshot(_ context.Context, id int64) error {
	r.snapshots = append(r.snapshots, id)
	return nil
}

// bareTask is a task with a recorder, n inputs and one output channel,
// driven by calling onElement directly.
func bareTask(n int) (*task, *recorder, chan element) {
	j := &Job{opts: Options{Now: time.Now}, log: slog.New(slog.DiscardHandler)}
	r := &attempt{j: j, acks: make(chan taskAck, 8)}
	rec := &recorder{}
	out := make(chan element, 64)
	rt := &router{edge: &job.Edge{Mode: job.Forward}, outs: []outlet{chanOutlet(out)}, targets: []int{0}, bufs: make([][]operator.Record, 1)}
	op := &chainOp{pop: &job.Operator{ID: "op"}, op: rec, routers: []*router{rt}}
	t := &task{r: r, spec: job.Task{ID: "op#0", Chain: "op"}, ops: []*chainOp{op}, routers: []*router{rt}, wm: operator.NoTime}
	op.t = t
	for i := 0; i < n; i++ {
		t.inputs = append(t.inputs, &input{feeds: op, wm: operator.NoTime, release: make(chan struct{}, 1)})
	}
	return t, rec, out
}

func drainOut(out chan element) []element {
	var es []element
	for {
		select {
		case e := <-out:
			es = append(es, e)
		default:
			return es
		}
	}
}

func TestWatermarkIsMinimumOfActiveInputs(t *testing.T) {
	tk, rec, out := bareTask(2)
	ctx := context.Background()
	steps := []struct {
		in   int
		e    element
		want []int64 // watermarks the operator has seen after the step
	}{
		{0, element{kind: elemWatermark, wm: 100}, nil},
		{1, element{kind: elemWatermark, wm: 50}, []int64{50}},
		{1, element{kind: elemWatermark, wm: 200}, []int64{50, 100}},
		{0, element{kind: elemIdle}, []int64{50, 100, 200}},                                   // idle input 0 is left out
		{1, element{kind: elemWatermark, wm: 300}, []int64{50, 100, 200, 300}},                // only input 1 counts
		{0, element{kind: elemData, recs: []operator.Record{{}}}, []int64{50, 100, 200, 300}}, // active again at 100: no regression
		{0, element{kind: elemWatermark, wm: 400}, []int64{50, 100, 200, 300}},                // min(400, 300) = 300
		{1, element{kind: elemWatermark, wm: 500}, []int64{50, 100, 200, 300, 400}},
		{0, element{kind: elemEnd}, []int64{50, 100, 200, 300, 400, 500}},
	}
	for i, s := range steps {
		if _, err := tk.onElement(ctx, inElem{s.in, s.e}); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.want, rec.wms); diff != "" {
			t.Fatalf("step %d: watermarks (-want +got):\n%s", i, diff)
		}
	}
	var fwd []int64
	for _, e := range drainOut(out) {
		if e.kind == elemWatermark {
			fwd = append(fwd, e.wm)
		}
	}
	if diff := cmp.Diff(rec.wms, fwd); diff != "" {
		t.Errorf("forwarded watermarks (-operator +forwarded):\n%s", diff)
	}
}

func TestAllInputsIdleMakesTaskIdle(t *testing.T) {
	tk, _, out := bareTask(2)
	ctx := context.Background()
	for _, s := range []inElem{{0, element{kind: elemWatermark, wm: 10}}, {1, element{kind: elemWatermark, wm: 20}}, {0, element{kind: elemIdle}}, {1, element{kind: elemIdle}}} {
		if _, err := tk.onElement(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	es := drainOut(out)
	if len(es) == 0 || es[len(es)-1].kind != elemIdle {
		t.Fatalf("last forwarded %+v, want idle", es)
	}
	if _, err := tk.onElement(ctx, inElem{1, element{kind: elemWatermark, wm: 30}}); err != nil {
		t.Fatal(err)
	}
	es = drainOut(out)
	if len(es) != 1 || es[0].kind != elemWatermark || es[0].wm != 30 {
		t.Errorf("after input 1 resumed: %+v, want watermark 30", es)
	}
}

func TestBarrierAlignment(t *testing.T) {
	tk, rec, out := bareTask(2)
	ctx := context.Background()
	b := barrier{id: 7}
	if _, err := tk.onElement(ctx, inElem{0, element{kind: elemBarrier, b: b}}); err != nil {
		t.Fatal(err)
	}
	if len(rec.snapshots) != 0 {
		t.Fatalf("snapshot %v before the barrier arrived on input 1", rec.snapshots)
	}
	// Input 1 still flows before its barrier.
	if _, err := tk.onElement(ctx, inElem{1, element{kind: elemData, recs: make([]operator.Record, 3)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.onElement(ctx, inElem{1, element{kind: elemBarrier, b: b}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{7}, rec.snapshots); diff != "" {
		t.Fatalf("snapshots (-want +got):\n%s", diff)
	}
	for i, in := range tk.inputs {
		select {
		case <-in.release:
		default:
			t.Errorf("input %d not released", i)
		}
	}
	es := drainOut(out)
	if len(es) != 2 || es[0].kind != elemData || len(es[0].recs) != 3 || es[1].kind != elemBarrier || es[1].b != b {
		t.Errorf("forwarded %+v, want the 3 records then barrier 7", es)
	}
	tk.r.wg.Wait()
	if a := <-tk.r.acks; a.id != 7 || a.task != "op#0" {
		t.Errorf("ack %+v", a)
	}
}

// TestForwarderHoldsAfterBarrier checks that an input is not read past a
// barrier until released.
func TestForwarderHoldsAfterBarrier(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := &input{ch: make(chan element, 4), release: make(chan struct{}, 1)}
	merged := make(chan inElem)
	in.ch <- element{kind: elemBarrier, b: barrier{id: 1}}
	in.ch <- element{kind: elemData}
	go in.forward(ctx, 0, merged)
	if e := <-merged; e.e.kind != elemBarrier {
		t.Fatalf("first %+v", e)
	}
	select {
	case e := <-merged:
		t.Fatalf("read past the barrier before release: %+v", e)
	case <-time.After(50 * time.Millisecond):
	}
	in.release <- struct{}{}
	select {
	case e := <-merged:
		if e.e.kind != elemData {
			t.Fatalf("after release %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not released")
	}
}

func TestWatermarkGen(t *testing.T) {
	batch := func(vals ...any) message.Batch {
		var b message.Batch
		for _, v := range vals {
			b.Messages = append(b.Messages, message.NewStructured(v))
		}
		return b
	}
	t.Run("bounded out of orderness", func(t *testing.T) {
		g := newWatermarkGen(&job.TimePolicy{Mode: "event_time", TimestampField: "ts", Strategy: "bounded_out_of_orderness", OutOfOrdernessMs: 100}, 0)
		recs, dropped := g.records(batch(
			map[string]any{"ts": float64(1000)},
			map[string]any{"ts": "1970-01-01T00:00:02Z"},
			map[string]any{"ts": "yesterday"},
			map[string]any{"other": 1},
			"not an object",
			map[string]any{"ts": float64(1500)},
		), 5)
		if dropped != 3 || len(recs) != 3 {
			t.Fatalf("kept %d, dropped %d; want 3 and 3", len(recs), dropped)
		}
		if got := []int64{recs[0].Time, recs[1].Time, recs[2].Time}; !cmp.Equal(got, []int64{1000, 2000, 1500}) {
			t.Errorf("times %v", got)
		}
		if wm := g.watermark(5); wm != 2000-100-1 {
			t.Errorf("watermark %d, want 1899", wm)
		}
	})
	t.Run("monotonous", func(t *testing.T) {
		g := newWatermarkGen(&job.TimePolicy{Mode: "event_time", TimestampField: "ts", Strategy: "monotonous"}, 0)
		if wm := g.watermark(0); wm != operator.NoTime {
			t.Errorf("watermark before any record %d", wm)
		}
		g.records(batch(map[string]any{"ts": float64(70)}), 0)
		if wm := g.watermark(0); wm != 69 {
			t.Errorf("watermark %d, want 69", wm)
		}
	})
	t.Run("processing time", func(t *testing.T) {
		g := newWatermarkGen(nil, 0)
		recs, _ := g.records(message.Batch{Messages: []message.Message{message.New([]byte(`{"a":1}`))}}, 1234)
		if recs[0].Time != 1234 || string(recs[0].Value.([]byte)) != `{"a":1}` {
			t.Errorf("record %+v: want the payload undecoded at time 1234", recs[0])
		}
		if wm := g.watermark(2000); wm != 1999 {
			t.Errorf("watermark %d, want 1999", wm)
		}
	})
	t.Run("idle timeout", func(t *testing.T) {
		g := newWatermarkGen(&job.TimePolicy{Mode: "event_time", TimestampField: "ts", IdleTimeoutMs: 100}, 0)
		g.records(batch(map[string]any{"ts": float64(1)}), 1000)
		if g.becameIdle(1099) {
			t.Error("idle before the timeout")
		}
		if !g.becameIdle(1100) || g.becameIdle(1200) {
			t.Error("want idle once at the timeout")
		}
		g.records(batch(map[string]any{"ts": float64(2)}), 1300)
		if g.becameIdle(1350) || !g.becameIdle(1400) {
			t.Error("want active after data, idle again a timeout later")
		}
	})
	if _, ok := eventTime(map[string]any{"ts": math.NaN()}, "ts"); ok {
		t.Error("NaN accepted as a timestamp")
	}
}

// wmOp keeps the highest watermark it was given.
type wmOp struct {
	baseOp
	wm *atomic.Int64
}

func (w *wmOp) Process(context.Context, []operator.Record, operator.Collector) error { return nil }
func (w *wmOp) OnWatermark(_ context.Context, wm int64, _ operator.Collector) error {
	w.wm.Store(wm)
	return nil
}

// TestIdleSourceDoesNotHoldWatermark stalls one of two source subtasks:
// with idle_timeout_ms the downstream watermark advances on the other
// alone; without it, it cannot.
func TestIdleSourceDoesNotHoldWatermark(t *testing.T) {
	for _, idle := range []int64{50, 0} {
		tp := &job.TimePolicy{Mode: "event_time", TimestampField: "ts", Strategy: "bounded_out_of_orderness", IdleTimeoutMs: idle}
		p := makePlan("idle", 16, []opSpec{
			{id: "src", kind: "source", par: 2, typ: "seq", time: tp, conf: map[string]any{"n": 0, "stall": true, "hooks": &seqHooks{}}},
			{id: "win", kind: "window", par: 1, time: tp},
		}, []edgeSpec{{from: "src", to: "win", mode: job.Rebalance}})
		var wm atomic.Int64
		wm.Store(operator.NoTime)
		j, err := Build("jobs[0]", p, testOptions(map[string]func() operator.Operator{"win": func() operator.Operator { return &wmOp{wm: &wm} }}))
		if err != nil {
			t.Fatal(err)
		}
		_, cancel := runJob(t, j)
		var in int64
		eventually(t, "records at the window", func() bool {
			in = 0
			for _, ts := range j.Observe().Tasks {
				if ts.ID == "win#0" {
					in = ts.RecordsIn
				}
			}
			return in > 10_000
		})
		if idle > 0 {
			eventually(t, "the watermark to advance past the stalled subtask", func() bool { return wm.Load() > 1000 })
		} else if got := wm.Load(); got != operator.NoTime {
			t.Errorf("watermark %d without idle_timeout_ms, want none while a subtask has sent nothing", got)
		}
		cancel()
	}
}
