package mqtt

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/stream"
)

// subscriberDoc is a node configuration with one stream reading topic
// from b into the file at path.
func subscriberDoc(b *broker, clientID, topic string, qos int, path string) string {
	return fmt.Sprintf(`
streams:
  - id: sub
    input:
      type: mqtt
      host: 127.0.0.1
      port: %d
      client_id: %s
      topics: [%q]
      qos: %d
      clean_session: false
      connect_timeout_ms: 1000
      batch_size: 50
    pipeline:
      processors: []
    output:
      type: file
      path: %q
`, b.port, clientID, topic, qos, path)
}

// publisherDoc is a node configuration with one stream publishing count
// generated messages {"n": 1..count} to topic on b.
func publisherDoc(b *broker, topic string, qos, count int, interval string) string {
	return fmt.Sprintf(`
streams:
  - id: pub
    input:
      type: generate
      context: '{"n": {{count}}}'
      count: %d
      interval: %s
      batch_size: 10
    pipeline:
      processors: []
    output:
      type: mqtt
      host: 127.0.0.1
      port: %d
      client_id: gen-%s
      topic: {type: value, value: %q}
      qos: %d
      connect_timeout_ms: 1000
`, count, interval, b.port, strings.ReplaceAll(topic, "/", "-"), topic, qos)
}

// lines returns the numbers n of the JSON lines in the file at path.
func numbers(t testing.TB, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l == "" {
			continue
		}
		var v struct{ N int }
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			continue // a line being written
		}
		out = append(out, v.N)
	}
	return out
}

// checkAll fails unless every number in 1..n is present, and returns the
// number of duplicates.
func checkAll(t testing.TB, got []int, n int) int {
	t.Helper()
	seen := map[int]int{}
	for _, v := range got {
		seen[v]++
	}
	var missing []int
	dups := 0
	for i := 1; i <= n; i++ {
		if seen[i] == 0 {
			missing = append(missing, i)
		}
		if seen[i] > 1 {
			dups += seen[i] - 1
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d messages lost, first %v", len(missing), n, missing[:min(10, len(missing))])
	}
	return dups
}

func distinct(got []int) int {
	seen := map[int]bool{}
	for _, v := range got {
		seen[v] = true
	}
	return len(seen)
}

// TestStreamHappyPath: generate -> mqtt output -> broker -> mqtt input
// -> file, at QoS 1 and 2; count in = count out.
func TestStreamHappyPath(t *testing.T) {
	b := startBroker(t)
	for _, qos := range []int{1, 2} {
		t.Run(fmt.Sprintf("qos%d", qos), func(t *testing.T) {
			const n = 300
			topic := fmt.Sprintf("s/happy%d", qos)
			path := filepath.Join(t.TempDir(), "out.jsonl")
			sub := componenttest.Engine(t, subscriberDoc(b, fmt.Sprintf("sub-happy%d", qos), topic, qos, path))
			componenttest.WaitFor(t, "the subscriber running", 15*time.Second, func() bool { return sub.Ready() })
			componenttest.Engine(t, publisherDoc(b, topic, qos, n, "0s"))
			componenttest.WaitFor(t, fmt.Sprintf("%d messages in the file", n), 30*time.Second, func() bool {
				return len(numbers(t, path)) >= n
			})
			got := numbers(t, path)
			if dups := checkAll(t, got, n); dups > 0 || len(got) != n {
				t.Errorf("%d lines for %d messages (%d duplicates) without any failure", len(got), n, dups)
			}
		})
	}
}

// TestStreamBrokerDownAtStart: with the broker down, the stream stays
// starting and not ready with the connect error shown; once the broker
// is up it runs and delivers.
func TestStreamBrokerDownAtStart(t *testing.T) {
	b := newBroker(t)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	e := componenttest.Engine(t, subscriberDoc(b, "sub-down", "s/down", 1, path))
	componenttest.WaitFor(t, "the connect error", 15*time.Second, func() bool {
		return componenttest.Stream(t, e, "sub").LastError != ""
	})
	st := componenttest.Stream(t, e, "sub")
	if st.State != stream.StateStarting || e.Ready() {
		t.Fatalf("with the broker down: state %s, ready %v; want starting and not ready", st.State, e.Ready())
	}
	if !strings.Contains(st.LastError, b.addr()) || !strings.Contains(st.LastError, "refused") {
		t.Errorf("LastError %q does not say the broker refused the connection", st.LastError)
	}
	b.start()
	componenttest.WaitFor(t, "the stream running", 30*time.Second, func() bool {
		return componenttest.Stream(t, e, "sub").State == stream.StateRunning && e.Ready()
	})
	publish(t, b, "s/down", 1, nil, `{"n": 1}`, `{"n": 2}`)
	componenttest.WaitFor(t, "2 messages in the file", 15*time.Second, func() bool { return len(numbers(t, path)) >= 2 })
	checkAll(t, numbers(t, path), 2)
}

// TestStreamBrokerRestart: the broker stops and starts again (keeping
// its sessions, as a broker with persistence does) while messages flow
// at QoS 1 from a generate stream to a file stream. Nothing is lost;
// duplicates are counted and bounded.
func TestStreamBrokerRestart(t *testing.T) {
	const n = 2000
	b := startBroker(t)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	sub := componenttest.Engine(t, subscriberDoc(b, "sub-restart", "s/restart", 1, path))
	componenttest.WaitFor(t, "the subscriber running", 15*time.Second, func() bool { return sub.Ready() })
	pub := componenttest.Engine(t, publisherDoc(b, "s/restart", 1, n, "2ms"))

	componenttest.WaitFor(t, "a quarter of the messages through", 30*time.Second, func() bool {
		return len(numbers(t, path)) >= n/4
	})
	b.stop()
	// An outage, not a measurement: both clients see the connection drop
	// and retry while the broker is away.
	time.Sleep(500 * time.Millisecond)
	b.start()

	deadline := time.Now().Add(45 * time.Second)
	for distinct(numbers(t, path)) < n {
		if time.Now().After(deadline) {
			got := numbers(t, path)
			t.Logf("publisher %+v", componenttest.Stream(t, pub, "pub"))
			t.Logf("subscriber %+v", componenttest.Stream(t, sub, "sub"))
			checkAll(t, got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := numbers(t, path)
	dups := checkAll(t, got, n)
	t.Logf("broker restart: %d messages, %d lines, %d duplicates", n, len(got), dups)
	st := componenttest.Stream(t, pub, "pub")
	t.Logf("publisher: %d retries, last error %q", st.Retries, st.LastError)
	if dups > n/2 {
		t.Errorf("%d duplicates for %d messages", dups, n)
	}
}
