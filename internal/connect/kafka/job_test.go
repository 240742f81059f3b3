package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/kernel"
)

// TestJobExactlyOnce runs kafka (split, replayed) -> kafka (transactional)
// as a job, stops it after some checkpoints while data is in flight,
// produces more and resumes from the checkpoint, at the same parallelism
// and at another (the partitions' offsets are redistributed): a
// read_committed consumer sees every input record exactly once.
func TestJobExactlyOnce(t *testing.T) {
	for _, tc := range []struct{ from, to int }{{2, 2}, {2, 3}, {3, 1}} {
		t.Run(fmt.Sprintf("%d to %d", tc.from, tc.to), func(t *testing.T) { testJobExactlyOnce(t, tc.from, tc.to) })
	}
}

func testJobExactlyOnce(t *testing.T, from, to int) {
	c := cluster(t, kfake.SeedTopics(4, "in"), kfake.SeedTopics(2, "out"))
	addr := c.ListenAddrs()[0]
	produce(t, addr, "in", 0, 300)
	spec := config.Job{
		ID: "kjob", Version: 1, Parallelism: from, MaxParallelism: 64,
		Operators: []config.Operator{{ID: "src", Kind: "source"}, {ID: "out", Kind: "sink"}},
		Edges:     []config.Edge{{From: "src", To: "out"}},
		Sources: []config.Source{{OperatorID: "src", InputType: "kafka", Config: map[string]any{
			"brokers": []any{addr}, "topics": []any{"in"}, "batch_size": 7,
		}}},
		Sinks: []config.Sink{{OperatorID: "out", OutputType: "kafka", Config: map[string]any{
			"brokers": []any{addr}, "topic": "out",
		}}},
		State:      &config.JobState{Backend: "embedded_kv", Durability: "durable", FormatVersion: 1, MaxPendingTransactions: 64, Root: t.TempDir()},
		Checkpoint: &config.Checkpoint{IntervalMs: 50, Retention: 2, ObjectStoreURI: "file://" + t.TempDir()},
		Recovery:   "latest_checkpoint",
	}
	build := func() *kernel.Job {
		p, probs := job.Build("jobs[0]", spec)
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		j, err := kernel.Build("jobs[0]", p, kernel.Options{Registry: component.Default, Spec: &spec})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(j *kernel.Job, until func() bool) {
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- j.Run(rctx) }()
		for !until() {
			if ctx.Err() != nil {
				stop()
				t.Fatalf("timed out: %+v", j.Observe())
			}
			time.Sleep(10 * time.Millisecond)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	first := build()
	// Stop once a checkpoint injected after the first records reached the
	// sink completed and its transaction's output is visible to a
	// read_committed consumer: the sink commits after the checkpoint
	// completes, so a run stopped at once may have committed nothing yet.
	after := int64(-1)
	visible := newCounter(t, addr, "out", true)
	run(first, func() bool {
		o := first.Observe()
		if after < 0 {
			for _, ts := range o.Tasks {
				if ts.RecordsOut > 0 {
					after = o.LastCheckpoint + 2 // the next one may have been injected before
					break
				}
			}
		}
		if after < 0 || o.LastCheckpoint < max(after, 3) {
			return false
		}
		visible.poll(50 * time.Millisecond)
		return len(visible.seen) > 0
	})
	produce(t, addr, "in", 300, 200)
	firstRun := committed(t, addr)
	if len(firstRun) == 0 {
		t.Fatal("the first run committed nothing")
	}
	t.Logf("first run: %d records committed, checkpoint %d", len(firstRun), first.Observe().LastCheckpoint)

	out := newCounter(t, addr, "out", true)
	spec.Parallelism = to
	second := build()
	run(second, func() bool {
		out.poll(100 * time.Millisecond)
		return len(out.seen) >= 500
	})
	for range 5 {
		out.poll(200 * time.Millisecond)
	}
	if o := second.Observe(); o.RestoredFrom == "" {
		t.Errorf("second run did not restore: %+v", o)
	}
	for _, id := range ids(0, 500) {
		if out.seen[id] != 1 {
			t.Errorf("%s committed %d times", id, out.seen[id])
		}
	}
	if out.n != 500 {
		t.Errorf("%d records committed, want 500", out.n)
	}
}
