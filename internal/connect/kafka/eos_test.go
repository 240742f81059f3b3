package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowplane/flowplane/internal/component"
)

func eosOutput(t *testing.T, addr string) *Output {
	t.Helper()
	o, err := NewOutput(map[string]any{"brokers": []any{addr}, "topic": "out", "exactly_once": true, "transactional_id": "fp"},
		component.Resources{StreamID: "mirror"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close(context.Background()) })
	if err := o.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	return o.(*Output)
}

// readUntil reads topic out from the start until it has seen last, and
// returns the values in order. Records of one partition come in offset
// order, so anything visible before last has been read.
func readUntil(t *testing.T, addr, last string, readCommitted bool) []string {
	t.Helper()
	c := newCounter(t, addr, "out", readCommitted)
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !containsString(got, last) {
		fs := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%q not read within 30s; read %v", last, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

func containsString(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

// TestExactlyOnceStream: each Write of a stream's output with
// exactly_once is one transaction. A read_committed consumer sees every
// record of the committed batches and none of the batch whose write
// failed (a record too large for the producer fails it after the others
// were produced into the transaction, which is then aborted); a
// read_uncommitted consumer sees the aborted records, so the abort had
// something to hide. The output writes again after the abort.
func TestExactlyOnceStream(t *testing.T) {
	c := cluster(t, kfake.SeedTopics(1, "out"))
	addr := c.ListenAddrs()[0]
	ctx := context.Background()
	o := eosOutput(t, addr)

	if err := o.Write(ctx, batchOf([]string{"a1", "a2", "a3"})); err != nil {
		t.Fatal(err)
	}
	if err := o.Write(ctx, batchOf([]string{"b1", "b2"})); err != nil {
		t.Fatal(err)
	}
	// x1 and x2 are produced (ProduceSync waits for their acknowledgement)
	// into the transaction; the last record, beyond the producer's 1 MB
	// batch bound, fails at once.
	big := batchOf([]string{"x1", "x2", strings.Repeat("x", 2<<20)})
	err := o.Write(ctx, big)
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("write of a too large record: %v, want MESSAGE_TOO_LARGE", err)
	}
	if err := o.Write(ctx, batchOf([]string{"c1"})); err != nil {
		t.Fatalf("write after the abort: %v", err)
	}

	if diff := cmp.Diff([]string{"a1", "a2", "a3", "b1", "b2", "c1"}, readUntil(t, addr, "c1", true)); diff != "" {
		t.Errorf("read_committed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a1", "a2", "a3", "b1", "b2", "x1", "x2", "c1"}, readUntil(t, addr, "c1", false)); diff != "" {
		t.Errorf("read_uncommitted (-want +got):\n%s", diff)
	}
}

// BenchmarkExactlyOnceWrite: one transaction (begin, 100 records,
// commit) per iteration, against kfake.
func BenchmarkExactlyOnceWrite(b *testing.B) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	o, err := NewOutput(map[string]any{"brokers": []any{c.ListenAddrs()[0]}, "topic": "out", "exactly_once": true},
		component.Resources{StreamID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	defer o.Close(ctx)
	if err := o.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	vals := make([]string, 100)
	for i := range vals {
		vals[i] = `{"id":` + string(rune('0'+i%10)) + `}`
	}
	batch := batchOf(vals)
	for b.Loop() {
		if err := o.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}
