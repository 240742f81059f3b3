package kafka

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func txnOutput(t *testing.T, addr string) *Output {
	t.Helper()
	o, err := NewOutput(map[string]any{"brokers": []any{addr}, "topic": "out"}, component.Resources{StreamID: "job1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	return o.(*Output)
}

func batchOf(vals []string) message.Batch {
	b := message.Batch{}
	for _, v := range vals {
		b.Messages = append(b.Messages, message.New([]byte(v)))
	}
	return b
}

// committedCount reads topic out with read_committed until it stops
// growing for a few polls, and returns the distinct values it saw.
func committed(t *testing.T, addr string) map[string]int {
	t.Helper()
	c := newCounter(t, addr, "out", true)
	for range 5 {
		c.poll(300 * time.Millisecond)
	}
	return c.seen
}

// TestTransactionalCrashResume: a transaction prepared by a process that
// then dies is committed by a new process from its handle alone; the
// transaction the dead process left open after it is aborted; committing
// the handle again (a second crash) is a no-op. read_committed consumers
// see exactly the prepared data.
func TestTransactionalCrashResume(t *testing.T) {
	c := cluster(t, kfake.SeedTopics(2, "out"))
	addr := c.ListenAddrs()[0]
	ctx := context.Background()

	o := txnOutput(t, addr)
	if err := o.Begin(ctx, "sink", 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := o.Write(ctx, batchOf(ids(0, 10))); err != nil {
		t.Fatal(err)
	}
	h1, err := o.Prepare(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	var hh txnHandle
	if err := json.Unmarshal(h1, &hh); err != nil || hh.TransactionalID != "flowplane-job1-sink-0-0" {
		t.Fatalf("handle %s: %v", h1, err)
	}
	if err := o.Write(ctx, batchOf(ids(100, 5))); err != nil { // after the checkpoint: must vanish
		t.Fatal(err)
	}
	if got := committed(t, addr); len(got) != 0 {
		t.Fatalf("read_committed sees %d records before any commit", len(got))
	}
	o.Close(ctx) // the crash: nothing ended

	for run := range 2 { // the second run restores the same checkpoint again
		o2 := txnOutput(t, addr)
		if err := o2.Begin(ctx, "sink", 0, [][]byte{h1}); err != nil {
			t.Fatalf("run %d: Begin: %v", run, err)
		}
		o2.Close(ctx)
	}
	got := committed(t, addr)
	if len(got) != 10 {
		t.Fatalf("read_committed sees %d records, want the 10 of checkpoint 1: %v", len(got), got)
	}
	for _, id := range ids(0, 10) {
		if got[id] != 1 {
			t.Errorf("%s seen %d times", id, got[id])
		}
	}

	// A normal run: prepare, write on (another slot), commit, commit again.
	o3 := txnOutput(t, addr)
	defer o3.Close(ctx)
	if err := o3.Begin(ctx, "sink", 0, nil); err != nil {
		t.Fatal(err)
	}
	o3.Write(ctx, batchOf(ids(10, 5)))
	h2, err := o3.Prepare(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := o3.Write(ctx, batchOf(ids(15, 5))); err != nil {
		t.Fatal(err)
	}
	if err := o3.Commit(ctx, h2); err != nil {
		t.Fatal(err)
	}
	if err := o3.Commit(ctx, h2); err != nil {
		t.Fatalf("second commit: %v", err)
	}
	h3, _ := o3.Prepare(ctx, 3)
	if err := o3.Commit(ctx, h3); err != nil {
		t.Fatal(err)
	}
	empty, _ := o3.Prepare(ctx, 4)
	if err := o3.Commit(ctx, empty); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, addr); len(got) != 20 {
		t.Fatalf("read_committed sees %d records, want 20", len(got))
	}
}
