package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/stream"
)

func streamDoc(in, out string) string {
	return fmt.Sprintf(`
streams:
  - id: k
    input:
      type: kafka
      brokers: [%q]
      topics: [in]
      consumer_group: g
      batch_size: 50
    pipeline:
      processors: []
    output:
      type: kafka
      brokers: [%q]
      topic: {type: value, value: out}
      key: {type: expr, expr: this.id}
`, in, out)
}

func TestExamples(t *testing.T) {
	for _, k := range []component.Kind{component.KindInput, component.KindOutput} {
		conf := componenttest.Example(t, component.Default, k, "kafka")
		var err error
		if k == component.KindInput {
			_, err = NewInput(conf, component.Resources{})
		} else {
			_, err = NewOutput(conf, component.Resources{})
		}
		if err != nil {
			t.Errorf("%s example: %v", k, err)
		}
	}
}

// TestStreamHappyPath moves records kafka -> kafka through a real stream:
// every record arrives.
func TestStreamHappyPath(t *testing.T) {
	c := cluster(t, kfake.SeedTopics(3, "in", "out"))
	addr := c.ListenAddrs()[0]
	produce(t, addr, "in", 0, 300)
	componenttest.Engine(t, streamDoc(addr, addr))
	out := newCounter(t, addr, "out", false)
	out.waitUnique(t, 300, 30*time.Second)
	t.Logf("300 in, %d out, %d duplicates", out.n, out.duplicates())
}

// TestBrokerRestart restarts the broker mid-stream on the same port and
// data directory: nothing is lost.
func TestBrokerRestart(t *testing.T) {
	port, dir := freePort(t), t.TempDir()
	opts := []kfake.Opt{kfake.Ports(port), kfake.DataDir(dir), kfake.SeedTopics(2, "in", "out")}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	addr := c.ListenAddrs()[0]
	produce(t, addr, "in", 0, 3000)
	componenttest.Engine(t, streamDoc(addr, addr))
	out := newCounter(t, addr, "out", false)
	out.waitUnique(t, 50, 30*time.Second)
	before := len(out.seen)
	out.cl.Close()
	c.Close()
	c2, err := kfake.NewCluster(opts[:2]...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c2.Close)
	produce(t, addr, "in", 3000, 200)
	out = newCounter(t, addr, "out", false)
	out.waitUnique(t, 3200, 45*time.Second)
	t.Logf("3200 in (restart after %d were out), %d out, %d duplicates", before, out.n, out.duplicates())
}

// TestBrokerDownAtStart: Connect fails quickly and clearly, the stream
// stays starting and not ready, then runs once the broker is up.
func TestBrokerDownAtStart(t *testing.T) {
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	in, err := NewInput(map[string]any{"brokers": []any{addr}, "topics": []any{"in"}, "consumer_group": "g", "connect_timeout": "500ms"}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	err = in.Connect(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no broker of "+addr+" answered") {
		t.Fatalf("Connect: %v", err)
	}
	in.Close(context.Background())

	e := componenttest.Engine(t, streamDoc(addr, addr))
	componenttest.WaitFor(t, "a connect error", 20*time.Second, func() bool {
		st := componenttest.Stream(t, e, "k")
		return st.State == stream.StateStarting && st.LastError != "" && !e.Ready()
	})
	c := cluster(t, kfake.Ports(port), kfake.SeedTopics(1, "in", "out"))
	produce(t, c.ListenAddrs()[0], "in", 0, 20)
	out := newCounter(t, addr, "out", false)
	out.waitUnique(t, 20, 45*time.Second)
	if st := componenttest.Stream(t, e, "k"); st.State != stream.StateRunning {
		t.Errorf("state %s", st.State)
	}
}

// TestMetadata checks the broker facts an input puts on a message.
func TestMetadata(t *testing.T) {
	c := cluster(t, kfake.SeedTopics(1, "in"))
	addr := c.ListenAddrs()[0]
	produce(t, addr, "in", 0, 1)
	in := mustInput(t, map[string]any{"brokers": []any{addr}, "topics": []any{"in"}})
	b, ack := read(t, in)
	m := b.Messages[0]
	if string(m.Meta.Key) != "0" || m.Meta.Source != "in" || m.Meta.Partition != 0 || m.Meta.Offset != 0 || m.Meta.Timestamp.IsZero() {
		t.Errorf("meta %+v", m.Meta)
	}
	want := map[string]string{"kafka_topic": "in", "kafka_partition": "0", "kafka_offset": "0", "kafka_key": "0"}
	for k, v := range want {
		if m.Meta.Fields[k] != v {
			t.Errorf("field %s = %q, want %q", k, m.Meta.Fields[k], v)
		}
	}
	ack(context.Background(), nil)
}

func mustInput(t *testing.T, conf map[string]any) *Input {
	t.Helper()
	in, err := NewInput(conf, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(context.Background()) })
	return in.(*Input)
}

func read(t *testing.T, in component.Input) (message.Batch, message.AckFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, ack, err := in.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return b, ack
}

// TestUnackedIsReadAgain: a batch read but not acknowledged is read again
// by the next member of the group; acknowledged ones are not.
func TestUnackedIsReadAgain(t *testing.T) {
	c := cluster(t, kfake.SeedTopics(1, "in"))
	addr := c.ListenAddrs()[0]
	produce(t, addr, "in", 0, 10)
	conf := map[string]any{"brokers": []any{addr}, "topics": []any{"in"}, "consumer_group": "g", "batch_size": 4}
	a := mustInput(t, conf)
	b1, ack1 := read(t, a)
	if b1.Len() == 0 {
		t.Fatal("empty batch")
	}
	ack1(context.Background(), nil)
	b2, _ := read(t, a) // never acknowledged
	a.Close(context.Background())
	b := mustInput(t, conf)
	got, _ := read(t, b)
	if got.Messages[0].Meta.Offset != b2.Messages[0].Meta.Offset {
		t.Errorf("next member starts at offset %d, want %d (the first unacknowledged)", got.Messages[0].Meta.Offset, b2.Messages[0].Meta.Offset)
	}
}

// TestGroupRebalance runs two members of one group; the second joins
// mid-way. Every record is read and acknowledged, none lost.
func TestGroupRebalance(t *testing.T) {
	c := cluster(t, kfake.SeedTopics(4, "in"))
	addr := c.ListenAddrs()[0]
	produce(t, addr, "in", 0, 400)
	conf := map[string]any{"brokers": []any{addr}, "topics": []any{"in"}, "consumer_group": "g", "batch_size": 20}
	seen := map[string]int{}
	total := 0
	take := func(in *Input, d time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		b, ack, err := in.Read(ctx)
		if err != nil {
			return
		}
		for i := range b.Messages {
			p, _ := b.Messages[i].Payload()
			seen[string(p)]++
			total++
		}
		ack(context.Background(), nil)
	}
	a := mustInput(t, conf)
	for range 5 {
		take(a, 5*time.Second)
	}
	b := mustInput(t, conf)
	produce(t, addr, "in", 400, 100)
	deadline := time.Now().Add(45 * time.Second)
	for len(seen) < 500 && time.Now().Before(deadline) {
		take(a, 200*time.Millisecond)
		take(b, 200*time.Millisecond)
	}
	if len(seen) != 500 {
		t.Fatalf("read %d distinct of 500", len(seen))
	}
	for _, id := range ids(0, 500) {
		if seen[id] == 0 {
			t.Fatalf("lost %s", id)
		}
	}
	t.Logf("500 in, %d read, %d duplicates", total, total-len(seen))
}

// TestSplitPositionSeek: two split instances read disjoint partitions that
// together are the topic; a position resumes exactly after what was read.
func TestSplitPositionSeek(t *testing.T) {
	c := cluster(t, kfake.SeedTopics(4, "in"))
	addr := c.ListenAddrs()[0]
	produce(t, addr, "in", 0, 100)
	conf := map[string]any{"brokers": []any{addr}, "topics": []any{"in"}, "consumer_group": "ignored-in-jobs"}
	seen := map[string]int{}
	var pos [2][]byte
	for sub := range 2 {
		in, err := NewInput(conf, component.Resources{})
		if err != nil {
			t.Fatal(err)
		}
		sp := in.(*Input)
		if err := sp.Split(sub, 2); err != nil {
			t.Fatal(err)
		}
		if err := sp.Connect(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(sp.direct.owned) != 2 {
			t.Fatalf("subtask %d owns %v", sub, sp.direct.owned)
		}
		var hw int64
		for _, tp := range sp.direct.owned {
			hw += c.PartitionInfo("in", tp.Partition).HighWatermark
		}
		for range 100 {
			if sumNext(sp) == hw {
				break
			}
			b, ack := read(t, sp)
			for i := range b.Messages {
				p, _ := b.Messages[i].Payload()
				seen[string(p)]++
			}
			ack(context.Background(), nil)
		}
		if pos[sub], err = sp.Position(); err != nil {
			t.Fatal(err)
		}
		sp.Close(context.Background())
	}
	if len(seen) != 100 {
		t.Fatalf("split instances read %d distinct of 100", len(seen))
	}
	produce(t, addr, "in", 100, 40)
	for sub := range 2 {
		in, _ := NewInput(conf, component.Resources{})
		sp := in.(*Input)
		sp.Split(sub, 2)
		if err := sp.Connect(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := sp.Seek(context.Background(), pos[sub]); err != nil {
			t.Fatal(err)
		}
		var p0 map[string]map[string]int64
		json.Unmarshal(pos[sub], &p0)
		want := 0
		for _, tp := range sp.direct.owned {
			want += int(c.PartitionInfo("in", tp.Partition).HighWatermark - p0["in"][fmt.Sprint(tp.Partition)])
		}
		for got := 0; got < want; {
			b, ack := read(t, sp)
			for i := range b.Messages {
				p, _ := b.Messages[i].Payload()
				seen[string(p)]++
				got++
			}
			ack(context.Background(), nil)
		}
		sp.Close(context.Background())
	}
	for _, id := range ids(0, 140) {
		if seen[id] != 1 {
			t.Errorf("%s read %d times", id, seen[id])
		}
	}
}

func sumNext(in *Input) int64 {
	var n int64
	for _, o := range in.direct.next {
		n += o
	}
	return n
}
