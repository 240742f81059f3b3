package node_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/wire"
)

// sseEvent is one block of an event stream.
type sseEvent struct {
	Event string
	Data  string
}

// parseSSE splits an event stream into its events (comments and the retry
// line left out).
func parseSSE(b []byte) []sseEvent {
	var out []sseEvent
	for block := range strings.SplitSeq(string(b), "\n\n") {
		var ev sseEvent
		for line := range strings.SplitSeq(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				ev.Event = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev.Data = v
			}
		}
		if ev.Event != "" {
			out = append(out, ev)
		}
	}
	return out
}

// TestTapStream taps a stream whose payload holds a secret: the events are
// the sampled messages, redacted, and an end; the raw bytes never hold the
// secret.
func TestTapStream(t *testing.T) {
	t.Setenv(secretVar, secretValue)
	h := newHarness(t, doc(hcLocal, genStream("a", "x-"+secretRef)))
	res := h.expect(t, 200, "GET", "/streams/a/tap?rate=50&duration=1500ms&stage=input", "")
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if bytes.Contains(res.Body, []byte(secretValue)) || bytes.Contains(res.Body, []byte(secretValue[:12])) {
		t.Fatalf("the tap's bytes hold the secret:\n%s", res.Body)
	}
	evs := parseSSE(res.Body)
	if len(evs) < 3 {
		t.Fatalf("%d events, want some messages and an end:\n%s", len(evs), res.Body)
	}
	for _, ev := range evs[:len(evs)-1] {
		if ev.Event != wire.TapEventMessage {
			continue
		}
		var m wire.TapMessage
		if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
			t.Fatal(err)
		}
		if m.Stage != "input" || m.Encoding != wire.TapEncodingText || m.Payload != `{"s": "x-[redacted]"}` || m.SampledAt.IsZero() {
			t.Fatalf("message %+v", m)
		}
	}
	last := evs[len(evs)-1]
	var end wire.TapEnd
	if err := json.Unmarshal([]byte(last.Data), &end); err != nil || last.Event != wire.TapEventEnd || end.Reason != wire.TapEndDuration || end.Sampled < 2 {
		t.Fatalf("last event %+v (%v), want an end after the duration", last, err)
	}
}

func TestTapProblems(t *testing.T) {
	h := newHarness(t, doc(hcLocal, genStream("a", "a")))
	for _, tt := range []struct {
		path   string
		status int
		code   string
	}{
		{"/streams/nope/tap", 404, "stream_not_found"},
		{"/streams/a/tap?rate=1001", 400, "invalid_query"},
		{"/streams/a/tap?duration=2h", 400, "invalid_query"},
		{"/streams/a/tap?stage=processor:0", 400, "invalid_query"},
		{"/streams/a/tap?operator=x", 400, "invalid_query"},
		{"/jobs/nope/tap", 404, "job_not_found"},
	} {
		problem(t, h.expect(t, tt.status, "GET", tt.path, ""), tt.code)
	}
}

// TestTapSlowClient: a client that does not read makes the tap drop, not
// the stream wait; once it reads it is told how many were dropped.
func TestTapSlowClient(t *testing.T) {
	big := strings.Repeat("b", 32<<10)
	stream := fmt.Sprintf(`  - id: big
    input: {type: generate, context: '%s', interval: 1ms, batch_size: 1}
    pipeline: {processors: []}
    output: {type: drop}
`, big)
	h := newHarness(t, doc(hcLocal, stream))
	received := func() uint64 { return h.eng.Streams()[0].Received }

	conn, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /streams/big/tap?stage=input&rate=1000&duration=60s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	// Not reading, the client and the server hold at most their socket
	// buffers' worth (Linux autotuning: up to 32 MiB and 4 MiB, some 1100
	// messages of 32 KiB); the tap samples every message, so after 3000
	// it must have dropped.
	from := received()
	eventually(t, "the stream moves on while the client does not read", func() (bool, string) {
		n := received()
		return n > from+3000, fmt.Sprintf("received %d since the tap opened", n-from)
	})
	rd := bufio.NewReaderSize(conn, 1<<20)
	if err := conn.SetReadDeadline(time.Now().Add(waitFor)); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("no dropped event before %v", err)
		}
		if line != "event: dropped\n" {
			continue
		}
		data, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var c wire.TapCounts
		if err := json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &c); err != nil {
			t.Fatalf("dropped event %q: %v", data, err)
		}
		if c.Dropped == 0 || c.Sampled == 0 {
			t.Fatalf("dropped event %+v", c)
		}
		break
	}
	before := received()
	eventually(t, "the stream still runs", func() (bool, string) {
		return received() > before, "no message since the dropped event"
	})
}

// TestTapJob taps a job's source and its sink: each tap sees what passes
// its operator; an operator the job lacks is a 400 naming the ones it has.
func TestTapJob(t *testing.T) {
	h := newHarness(t, doc("", genStream("s", "s"))+"jobs:"+countJob("counts", ""))
	h.waitJob(t, "counts", "running", func(v node.JobView) bool { return v.State == "running" && v.RecordsOut > 0 })
	for _, tt := range []struct {
		query, stage, holds string
	}{
		{"operator=src", "src", `"k"`},
		{"", "out", `"n"`}, // the default: the first sink, given the counts
	} {
		res := h.expect(t, 200, "GET", "/jobs/counts/tap?duration=1500ms&rate=50&"+tt.query, "")
		var msgs int
		for _, ev := range parseSSE(res.Body) {
			if ev.Event != wire.TapEventMessage {
				continue
			}
			var m wire.TapMessage
			if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
				t.Fatal(err)
			}
			if m.Stage != tt.stage || !strings.Contains(m.Payload, tt.holds) {
				t.Fatalf("tap %q: message %+v", tt.query, m)
			}
			msgs++
		}
		if msgs == 0 {
			t.Fatalf("tap %q: no message:\n%s", tt.query, res.Body)
		}
	}
	p := problem(t, h.expect(t, 400, "GET", "/jobs/counts/tap?operator=nope", ""), "invalid_query")
	if !strings.Contains(p.Message, "src, counts, out") {
		t.Errorf("problem %q does not name the job's operators", p.Message)
	}
}
