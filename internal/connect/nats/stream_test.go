package nats_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/connect/nats"
	"github.com/flowplane/flowplane/internal/stream"
)

// TestJetStreamToFile: every message of a JetStream stream reaches a file
// through a real stream, and the durable consumer has acked them all.
func TestJetStreamToFile(t *testing.T) {
	ns := startServer(t)
	_, js := ns.client()
	createStream(t, js, "IN", "in.>")
	const n = 300
	publish(t, js, "in.orders", 0, n)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	e := componenttest.Engine(t, fmt.Sprintf(`streams:
  - id: js
    input:
      type: nats
      url: %s
      mode: {type: jet_stream, stream: IN, consumer_name: flowplane}
      batch_size: 32
      max_wait: 500ms
    pipeline: {processors: []}
    output: {type: file, path: %s}
`, ns.url(), path))
	componenttest.WaitFor(t, "all messages in the file", 20*time.Second, func() bool { return len(lines(t, path)) >= n })
	seen := map[string]int{}
	for _, l := range lines(t, path) {
		seen[idOf([]byte(l))]++
	}
	if len(seen) != n {
		t.Errorf("file holds %d distinct ids, want %d", len(seen), n)
	}
	cons, err := js.Consumer(testCtx(t), "IN", "flowplane")
	if err != nil {
		t.Fatal(err)
	}
	componenttest.WaitFor(t, "every message acked", 10*time.Second, func() bool {
		info, err := cons.Info(testCtx(t))
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.AckFloor.Stream == n
	})
	if s := status(t, e, "js"); s.Received != n || s.Sent != n {
		t.Errorf("received %d, sent %d; want %d", s.Received, s.Sent, n)
	}
}

// TestMemoryToJetStreamOutput: a stream publishes into JetStream with a
// subject expression and a Nats-Msg-Id; running the same data again
// stores nothing new (the server de-duplicates).
func TestMemoryToJetStreamOutput(t *testing.T) {
	ns := startServer(t)
	_, js := ns.client()
	createStream(t, js, "OUT", "out.>")
	const n = 50
	var msgs []string
	for i := range n {
		msgs = append(msgs, fmt.Sprintf(`'{"id":%d,"kind":"k%d"}'`, i, i%2))
	}
	doc := fmt.Sprintf(`streams:
  - id: pub
    input: {type: memory, batch_size: 8, messages: [%s]}
    pipeline: {processors: []}
    output:
      type: nats
      url: %s
      mode:
        type: jet_stream
        subject: {type: expr, expr: '"out." + this.kind'}
        msg_id: {type: expr, expr: 'this.id'}
      headers: {X-Test: "yes"}
`, strings.Join(msgs, ","), ns.url())
	for run := range 2 {
		e := componenttest.Engine(t, doc)
		componenttest.WaitFor(t, "the stream to complete", 20*time.Second, func() bool {
			return status(t, e, "pub").State == stream.StateCompleted
		})
		if s := status(t, e, "pub"); s.Sent != n {
			t.Errorf("run %d: sent %d, want %d (%s)", run, s.Sent, n, s.LastError)
		}
		if got := streamMsgs(t, js, "OUT"); got != n {
			t.Errorf("run %d: stream OUT holds %d messages, want %d", run, got, n)
		}
	}
	total, ids := streamIDs(t, js, "OUT")
	if total != n || len(ids) != n {
		t.Errorf("OUT: %d messages, %d distinct ids; want %d", total, len(ids), n)
	}
	st, err := js.Stream(testCtx(t), "OUT")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetMsg(testCtx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Subject != "out.k0" || raw.Header.Get("X-Test") != "yes" || raw.Header.Get(jetstream.MsgIDHeader) != "0" {
		t.Errorf("first message: subject %q, headers %v", raw.Subject, raw.Header)
	}
}

// TestCoreSubjects: core NATS in a queue group in, core NATS out on a
// subject chosen per message, headers carried through the metadata.
func TestCoreSubjects(t *testing.T) {
	ns := startServer(t)
	nc, _ := ns.client()
	got := make(chan *natsgo.Msg, 1000)
	sub, err := nc.ChanSubscribe("core.out.>", got)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	e := componenttest.Engine(t, fmt.Sprintf(`streams:
  - id: core
    input:
      type: nats
      url: %s
      mode: {type: regular, subject: core.in.>, queue_group: workers}
      batch_size: 16
    pipeline: {processors: []}
    output:
      type: nats
      url: %s
      mode: {type: regular, subject: {type: expr, expr: '"core.out." + meta.nats_subject'}}
      metadata_headers: true
`, ns.url(), ns.url()))
	componenttest.WaitFor(t, "the stream to run", 10*time.Second, func() bool {
		return status(t, e, "core").State == stream.StateRunning
	})
	const n = 200
	for i := range n {
		m := &natsgo.Msg{Subject: fmt.Sprintf("core.in.%d", i%3), Data: fmt.Appendf(nil, `{"id":%d}`, i),
			Header: natsgo.Header{"X-Trace": []string{fmt.Sprint("t", i)}}}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	deadline := time.After(20 * time.Second)
	for len(seen) < n {
		select {
		case m := <-got:
			id := idOf(m.Data)
			var i int
			fmt.Sscan(id, &i)
			if want := fmt.Sprintf("core.out.core.in.%d", i%3); m.Subject != want {
				t.Errorf("message %s on %q, want %q", id, m.Subject, want)
			}
			if m.Header.Get("X-Trace") != "t"+id || m.Header.Get("nats_subject") != "" {
				t.Errorf("message %s: headers %v, want X-Trace t%s and no nats_ fields", id, m.Header, id)
			}
			seen[id] = true
		case <-deadline:
			t.Fatalf("received %d of %d messages", len(seen), n)
		}
	}
	if s := status(t, e, "core"); s.Received != n {
		t.Errorf("stream received %d, want %d", s.Received, n)
	}
}

// TestServerDownAtStart: with no server, Connect fails quickly with an
// error naming the server (without credentials), can be called again,
// and a stream stays starting, not ready, until the server is up, then
// moves everything.
func TestServerDownAtStart(t *testing.T) {
	ns := newServer(t, freePort(t))
	url := fmt.Sprintf("nats://user:s3cr3t@127.0.0.1:%d", ns.port)
	in, err := nats.NewInput(map[string]any{"url": url, "connect_timeout": "1s",
		"mode": map[string]any{"type": "jet_stream", "stream": "IN", "consumer_name": "c"}}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := nats.NewOutput(map[string]any{"url": url, "connect_timeout": "1s",
		"mode": map[string]any{"type": "regular", "subject": "x"}}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	for name, connect := range map[string]func() error{
		"input":  func() error { return in.Connect(testCtx(t)) },
		"output": func() error { return out.Connect(testCtx(t)) },
	} {
		err := connect()
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("nats: connect to nats://127.0.0.1:%d", ns.port)) {
			t.Errorf("%s: Connect with the server down: %v", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the error shows the password: %v", name, err)
		}
	}

	path := filepath.Join(t.TempDir(), "out.jsonl")
	e := componenttest.Engine(t, fmt.Sprintf(`streams:
  - id: late
    input:
      type: nats
      url: %s
      connect_timeout: 500ms
      mode: {type: jet_stream, stream: IN, durable_name: late}
    pipeline: {processors: []}
    output: {type: file, path: %s}
`, ns.url(), path))
	componenttest.WaitFor(t, "a failed connect", 10*time.Second, func() bool { return status(t, e, "late").Errors > 0 })
	if s := status(t, e, "late"); s.State != stream.StateStarting || !strings.Contains(s.LastError, "nats: connect") || e.Ready() {
		t.Errorf("server down: state %s, last error %q, ready %v", s.State, s.LastError, e.Ready())
	}

	ns.start()
	_, js := ns.client()
	// The stream does not exist yet either: Connect keeps failing, naming it.
	componenttest.WaitFor(t, "a missing stream reported", 10*time.Second, func() bool {
		return strings.Contains(status(t, e, "late").LastError, `stream "IN"`)
	})
	createStream(t, js, "IN", "in.>")
	const n = 40
	publish(t, js, "in.x", 0, n)
	componenttest.WaitFor(t, "the stream to move the messages", 30*time.Second, func() bool { return len(lines(t, path)) >= n })
	if s := status(t, e, "late"); s.State != stream.StateRunning || !e.Ready() || s.Retries == 0 {
		t.Errorf("server up: state %s, ready %v, retries %d", s.State, e.Ready(), s.Retries)
	}
	// A component that failed Connect connects on a later call.
	if err := out.Connect(testCtx(t)); err != nil {
		t.Errorf("output Connect after the server came up: %v", err)
	}
	_ = out.Close(testCtx(t))
	_ = in.Close(testCtx(t))
}

// TestJetStreamRestartMidStream: JetStream in -> JetStream out with
// Nats-Msg-Id while the server is restarted (same port, same store) and a
// publisher keeps writing: every message arrives, none twice in the output
// stream; redeliveries on the input side are counted and reported.
func TestJetStreamRestartMidStream(t *testing.T) {
	ns := startServer(t)
	_, js := ns.client()
	createStream(t, js, "IN", "in.>")
	createStream(t, js, "OUT", "out.>")
	const n = 2000
	e := componenttest.Engine(t, fmt.Sprintf(`streams:
  - id: relay
    input:
      type: nats
      url: %[1]s
      reconnect_wait: 100ms
      mode: {type: jet_stream, stream: IN, durable_name: relay, ack_wait: 2s}
      batch_size: 50
      max_wait: 300ms
    pipeline: {processors: []}
    output:
      type: nats
      url: %[1]s
      reconnect_wait: 100ms
      timeout: 2s
      mode:
        type: jet_stream
        subject: out.relayed
        msg_id: {type: expr, expr: 'this.id'}
`, ns.url()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i += 100 {
			publish(t, js, "in.x", i, 100)
			time.Sleep(20 * time.Millisecond) // spread the input over the restart
		}
	}()
	componenttest.WaitFor(t, "output under way", 20*time.Second, func() bool { return streamMsgs(t, js, "OUT") >= n/5 })
	ns.stop()
	componenttest.WaitFor(t, "the outage reported", 10*time.Second, func() bool {
		return status(t, e, "relay").Errors > 0
	})
	t.Logf("during the outage: %q", status(t, e, "relay").LastError)
	ns.start()
	<-done
	componenttest.WaitFor(t, "every message relayed", 40*time.Second, func() bool { return streamMsgs(t, js, "OUT") >= n })
	total, ids := streamIDs(t, js, "OUT")
	dups := 0
	for _, c := range ids {
		dups += c - 1
	}
	cons, err := js.Consumer(testCtx(t), "IN", "relay")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	s := status(t, e, "relay")
	t.Logf("in %d, out %d, distinct %d, duplicates in OUT %d; input redelivered %d, received %d, sent %d, retries %d",
		n, total, len(ids), dups, info.NumRedelivered, s.Received, s.Sent, s.Retries)
	if len(ids) != n || total != n {
		t.Errorf("OUT holds %d messages with %d distinct ids, want %d", total, len(ids), n)
	}
	if s.Received < n || s.Received > 2*n {
		t.Errorf("received %d: want between %d and %d (duplicates bounded)", s.Received, n, 2*n)
	}
}
