package kafka

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// cluster starts a one-broker kfake cluster on 127.0.0.1 with topics of
// the given partitions.
func cluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// produce writes n records {"id": from+i} to topic.
func produce(t *testing.T, addr, topic string, from, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(from + i)), Value: fmt.Appendf(nil, `{"id":%d}`, from+i)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// counter reads a topic from the start and counts values.
type counter struct {
	cl   *kgo.Client
	seen map[string]int
	n    int
}

func newCounter(t *testing.T, addr, topic string, readCommitted bool) *counter {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &counter{cl: cl, seen: map[string]int{}}
}

// poll reads what is there within d.
func (c *counter) poll(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	fs := c.cl.PollFetches(ctx)
	fs.EachRecord(func(r *kgo.Record) {
		c.seen[string(r.Value)]++
		c.n++
	})
}

// waitUnique polls until want distinct values were seen, failing after
// within.
func (c *counter) waitUnique(t *testing.T, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(c.seen) < want {
		if time.Now().After(deadline) {
			t.Fatalf("saw %d distinct records of %d after %s", len(c.seen), want, within)
		}
		c.poll(200 * time.Millisecond)
	}
}

func (c *counter) duplicates() int { return c.n - len(c.seen) }

func ids(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"id":%d}`, from+i)
	}
	return out
}
