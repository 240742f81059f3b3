package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/stream"
)

// streamDoc is a node configuration with one stream "s" from input to
// output (YAML component bodies, indented by the caller's template).
func streamDoc(input, output string, extra ...string) string {
	return fmt.Sprintf(`streams:
  - id: s
    input:
%s
%s    output:
%s
`, indent(input, 6), cmpOr(strings.Join(extra, ""), "    pipeline:\n      processors: []\n"), indent(output, 6))
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n")
}

func single(url string) string { return fmt.Sprintf("mode: {type: single, url: %q}\n", url) }

// distinct counts the distinct values of vals and the duplicates.
func distinct(vals []string) (map[string]bool, int) {
	seen := make(map[string]bool, len(vals))
	dups := 0
	for _, v := range vals {
		if seen[v] {
			dups++
		}
		seen[v] = true
	}
	return seen, dups
}

func pushN(t *testing.T, c *goredis.Client, key string, n int) {
	t.Helper()
	ctx := context.Background()
	p := c.Pipeline()
	for i := range n {
		p.RPush(ctx, key, fmt.Sprintf(`{"n":%d}`, i))
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

func xaddN(t *testing.T, c *goredis.Client, key string, n int) {
	t.Helper()
	ctx := context.Background()
	p := c.Pipeline()
	for i := range n {
		p.XAdd(ctx, &goredis.XAddArgs{Stream: key, Values: []any{"message", fmt.Sprintf(`{"n":%d}`, i), "origin", "test"}})
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitAll waits until the list out holds n distinct values and returns the
// duplicates it holds.
func waitAll(t *testing.T, c *goredis.Client, out string, n int, within time.Duration) int {
	t.Helper()
	var dups int
	componenttest.WaitFor(t, fmt.Sprintf("%d distinct values in %s", n, out), within, func() bool {
		vals, err := c.LRange(context.Background(), out, 0, -1).Result()
		if err != nil {
			return false
		}
		var seen map[string]bool
		seen, dups = distinct(vals)
		return len(seen) >= n
	})
	return dups
}

// TestStreamList runs list -> list through a stream: every element
// arrives once and the processing list ends up empty (all acknowledged).
func TestStreamList(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	const n = 500
	pushN(t, c, "in", n)
	e := componenttest.Engine(t, streamDoc(
		"type: redis\n"+single(s.url())+"redis_type: {type: list, list: [in, in2]}\nbatch_size: 64",
		"type: redis\n"+single(s.url())+"redis_type: {type: list, key: out}"))
	if dups := waitAll(t, c, "out", n, 30*time.Second); dups != 0 {
		t.Errorf("%d duplicates without a failure", dups)
	}
	componenttest.WaitFor(t, "empty processing list", 10*time.Second, func() bool {
		return c.LLen(context.Background(), "in:processing").Val() == 0
	})
	if got := c.LLen(context.Background(), "out").Val(); got != n {
		t.Errorf("out has %d elements, want %d", got, n)
	}
	if st := componenttest.Stream(t, e, "s"); st.Received != n || st.Sent != n {
		t.Errorf("received %d, sent %d, want %d", st.Received, st.Sent, n)
	}
}

// TestStreamStreams runs streams -> streams with a consumer group: every
// entry arrives, the group's pending list ends empty, and the extra entry
// fields travel as metadata (written here into the key by expression).
func TestStreamStreams(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	const n = 400
	xaddN(t, c, "orders", n)
	componenttest.Engine(t, streamDoc(
		"type: redis\n"+single(s.url())+"redis_type: {type: streams, streams: [orders], group: g, consumer: c1}\nbatch_size: 50",
		"type: redis\n"+single(s.url())+"redis_type: {type: streams, key: {type: expr, expr: '\"copy-\" + meta.origin'}, max_len: 100000}"))
	componenttest.WaitFor(t, "all entries copied", 30*time.Second, func() bool {
		return c.XLen(context.Background(), "copy-test").Val() >= n
	})
	componenttest.WaitFor(t, "no pending entries", 10*time.Second, func() bool {
		p, err := c.XPending(context.Background(), "orders", "g").Result()
		return err == nil && p.Count == 0
	})
	if got := c.XLen(context.Background(), "copy-test").Val(); got != n {
		t.Errorf("copy has %d entries, want %d", got, n)
	}
	msgs := c.XRangeN(context.Background(), "copy-test", "-", "+", 1).Val()
	if len(msgs) != 1 || msgs[0].Values["message"] != `{"n":0}` {
		t.Errorf("first copied entry %v", msgs)
	}
}

// TestStreamSubscribe runs channel and pattern subscriptions into hashes
// and strings written by expression.
func TestStreamSubscribe(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, sub, out, check string
	}{
		{"channels", "{type: channels, channels: [ev]}",
			"redis_type: {type: hashes, key: seen, field: {type: expr, expr: 'this.id'}}", "hash"},
		{"patterns", "{type: patterns, patterns: ['ev*']}",
			"redis_type: {type: strings, key: {type: expr, expr: '\"k:\" + this.id + \":\" + meta.redis_pattern'}, ttl: 1h}", "strings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.FlushAll(ctx)
			e := componenttest.Engine(t, streamDoc(
				"type: redis\n"+single(s.url())+"redis_type: {type: subscribe, subscribe: "+tc.sub+"}",
				"type: redis\n"+single(s.url())+tc.out))
			componenttest.WaitFor(t, "ready", 10*time.Second, e.Ready)
			const n = 200
			for i := range n {
				if err := c.Publish(ctx, "ev", fmt.Sprintf(`{"id":"%d"}`, i)).Err(); err != nil {
					t.Fatal(err)
				}
			}
			componenttest.WaitFor(t, "every message written", 20*time.Second, func() bool {
				if tc.check == "hash" {
					return c.HLen(ctx, "seen").Val() == n
				}
				keys, _ := c.Keys(ctx, "k:*:ev*").Result()
				return len(keys) == n
			})
			if tc.check == "strings" {
				if ttl := c.TTL(ctx, "k:7:ev*").Val(); ttl <= 0 {
					t.Errorf("ttl %v, want a positive one", ttl)
				}
			}
		})
	}
}

// TestServerDownAtStart: the stream stays starting and not ready, its
// error naming Redis, while the server is down; once it is up, data flows.
func TestServerDownAtStart(t *testing.T) {
	s := newServer(t)
	e := componenttest.Engine(t, streamDoc(
		"type: redis\n"+single(s.url())+"redis_type: {type: streams, streams: [orders], group: g}",
		"type: redis\n"+single(s.url())+"redis_type: {type: list, key: out}"))
	componenttest.WaitFor(t, "a connect error", 20*time.Second, func() bool {
		return componenttest.Stream(t, e, "s").LastError != ""
	})
	st := componenttest.Stream(t, e, "s")
	if st.State != stream.StateStarting || e.Ready() {
		t.Errorf("state %s, ready %v; want starting, not ready", st.State, e.Ready())
	}
	if !strings.Contains(st.LastError, "redis") || !strings.Contains(st.LastError, s.addr()) {
		t.Errorf("error %q should name redis and the server", st.LastError)
	}
	s.start()
	c := s.client(t)
	xaddN(t, c, "orders", 50)
	waitAll(t, c, "out", 50, 60*time.Second)
	componenttest.WaitFor(t, "ready", 10*time.Second, e.Ready)
}

// TestServerRestartMidStream kills redis-server (SIGKILL; every write was
// fsynced) while a stream moves data, starts it again on the same port
// and checks every element or entry arrives; duplicates are counted.
func TestServerRestartMidStream(t *testing.T) {
	for _, tc := range []struct{ name, redisType string }{
		{"list", "{type: list, list: [in]}"},
		{"streams", "{type: streams, streams: [in], group: g, consumer: c1}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t)
			c := s.client(t)
			const n = 5000
			if tc.name == "list" {
				pushN(t, c, "in", n)
			} else {
				xaddN(t, c, "in", n)
			}
			componenttest.Engine(t, streamDoc(
				"type: redis\n"+single(s.url())+"redis_type: "+tc.redisType+"\nbatch_size: 5",
				"type: redis\n"+single(s.url())+"redis_type: {type: list, key: out}"))
			componenttest.WaitFor(t, "some data moved", 30*time.Second, func() bool {
				return c.LLen(context.Background(), "out").Val() >= n/10
			})
			atKill := c.LLen(context.Background(), "out").Val()
			s.kill()
			if atKill >= n {
				t.Fatalf("all %d moved before the kill: the test did not restart anything mid-stream", n)
			}
			s.start()
			dups := waitAll(t, c, "out", n, 45*time.Second)
			t.Logf("%s: %d in, %d distinct out, %d duplicates; killed after %d", tc.name, n, n, dups, atKill)
			if dups > n/2 {
				t.Errorf("%d duplicates: more than half the input", dups)
			}
		})
	}
}
