package websocket_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/connect/websocket"
	"github.com/flowplane/flowplane/internal/stream"
)

func streamDoc(url, path string) string {
	return fmt.Sprintf(`streams:
  - id: ws
    input:
      type: websocket
      url: %s
      headers: {X-Token: sesame}
      timeout: 2
      batch_size: 16
    pipeline: {processors: []}
    output: {type: file, path: %s}
`, url, path)
}

// wantIDs checks that path holds exactly the messages first..first+n-1,
// each once.
func wantIDs(t *testing.T, path string, n int) {
	t.Helper()
	seen := distinct(t, path)
	for i := range n {
		if l := fmt.Sprintf(`{"id":%d}`, i); seen[l] != 1 {
			t.Errorf("%s written %d times, want 1", l, seen[l])
		}
	}
	if got := len(lines(t, path)); got != n {
		t.Errorf("file holds %d lines, want %d", got, n)
	}
}

// TestStreamHappyPath: every message the server sends, text or binary,
// reaches the file through a real stream, once; the handshake carries
// the configured headers.
func TestStreamHappyPath(t *testing.T) {
	srv := startServer(t)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	e := componenttest.Engine(t, streamDoc(srv.url(), path))
	c := srv.accept()
	if got := c.headers.Get("X-Token"); got != "sesame" {
		t.Errorf("handshake header X-Token = %q, want sesame", got)
	}
	const n = 500
	c.send(t, 0, n)
	componenttest.WaitFor(t, "all messages in the file", 20*time.Second, func() bool { return len(lines(t, path)) >= n })
	wantIDs(t, path, n)
	componenttest.WaitFor(t, "the counters", 20*time.Second, func() bool {
		s := status(t, e, "ws")
		return s.Received == n && s.Sent == n
	})
	if s := status(t, e, "ws"); s.State != stream.StateRunning {
		t.Errorf("state %s, want running", s.State)
	}
}

// TestServerDownAtStart: with nothing listening, the stream stays
// starting with a connect error naming the URL; once the server is up it
// connects and runs.
func TestServerDownAtStart(t *testing.T) {
	srv := newServer(t)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	e := componenttest.Engine(t, streamDoc(srv.url(), path))
	componenttest.WaitFor(t, "a connect error", 20*time.Second, func() bool {
		return status(t, e, "ws").LastError != ""
	})
	s := status(t, e, "ws")
	if s.State != stream.StateStarting {
		t.Errorf("state %s while the server is down, want starting", s.State)
	}
	if want := "websocket: connect to " + srv.url(); !strings.Contains(s.LastError, want) {
		t.Errorf("last error %q does not contain %q", s.LastError, want)
	}
	srv.start()
	c := srv.accept()
	componenttest.WaitFor(t, "the stream to run", 20*time.Second, func() bool {
		return status(t, e, "ws").State == stream.StateRunning
	})
	const n = 50
	c.send(t, 0, n)
	componenttest.WaitFor(t, "all messages in the file", 20*time.Second, func() bool { return len(lines(t, path)) >= n })
	wantIDs(t, path, n)
}

// TestServerRestart: the server drops the connection mid-stream; the
// input reports it, dials again, and every message sent while a
// connection was open arrives exactly once.
func TestServerRestart(t *testing.T) {
	srv := startServer(t)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	e := componenttest.Engine(t, streamDoc(srv.url(), path))
	const half = 100
	srv.accept().send(t, 0, half)
	componenttest.WaitFor(t, "the first half in the file", 20*time.Second, func() bool { return len(lines(t, path)) >= half })

	// The dropped connection fails a Read; the stream counts the error
	// and retries, and only the retried Read dials the new connection.
	srv.stop()
	srv.start()
	srv.accept().send(t, half, half)
	componenttest.WaitFor(t, "the second half in the file", 20*time.Second, func() bool { return len(lines(t, path)) >= 2*half })
	wantIDs(t, path, 2*half)
	if s := status(t, e, "ws"); s.Received != 2*half || s.Retries == 0 || s.Errors == 0 {
		t.Errorf("received %d (want %d), errors %d, retries %d (want > 0)", s.Received, 2*half, s.Errors, s.Retries)
	}
}

// TestConnectDown: Connect against a closed port fails with a clear
// error, may be called again, and succeeds once the server is up; Close
// then ends Reads.
func TestConnectDown(t *testing.T) {
	srv := newServer(t)
	in, err := websocket.NewInput(map[string]any{"url": srv.url(), "timeout": 2}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	err = in.Connect(testCtx(t))
	if err == nil || !strings.Contains(err.Error(), "websocket: connect to "+srv.url()) || component.IsPermanent(err) {
		t.Fatalf("Connect with the server down: %v", err)
	}
	srv.start()
	if err := in.Connect(testCtx(t)); err != nil {
		t.Fatalf("Connect again: %v", err)
	}
	c := srv.accept()
	c.send(t, 0, 2)
	var got []string
	for len(got) < 2 {
		b, ack, err := in.Read(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range b.Messages {
			p, _ := m.Payload()
			got = append(got, string(p)+"/"+m.Meta.Fields["websocket_message_type"]+"/"+m.Meta.Source)
		}
		if err := ack(testCtx(t), nil); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{`{"id":0}/text/` + srv.url(), `{"id":1}/binary/` + srv.url()}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read %q, want %q", got, want)
	}
	if err := in.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the server still sees the client after Close")
	}
	if _, _, err := in.Read(testCtx(t)); err == nil {
		t.Error("Read after Close succeeded")
	}
}

// TestReadHonoursContext: a Read waiting for a message returns when its
// context ends.
func TestReadHonoursContext(t *testing.T) {
	srv := startServer(t)
	in, err := websocket.NewInput(map[string]any{"url": srv.url()}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, _, err := in.Read(ctx)
		done <- err
	}()
	srv.accept()
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Errorf("Read returned %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Read did not return after its context ended")
	}
}

// TestConfig: the constructor's checks, with the field named.
func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf map[string]any
		want string // error substring; "" means valid
	}{
		{"minimal", map[string]any{"url": "ws://127.0.0.1:1/x"}, ""},
		{"wss with headers", map[string]any{"url": "wss://example.com/ws", "headers": map[string]any{"A": "b"}, "timeout": 3}, ""},
		{"missing url", map[string]any{}, "url: required"},
		{"http scheme", map[string]any{"url": "http://127.0.0.1/x"}, `url: scheme "http" is not ws or wss`},
		{"no host", map[string]any{"url": "ws:///x"}, "url: no host"},
		{"bad url", map[string]any{"url": "ws://user:secret@[::1/x"}, "url: not a URL"},
		{"zero timeout", map[string]any{"url": "ws://h/x", "timeout": 0}, "timeout: must be at least 1"},
		{"zero batch", map[string]any{"url": "ws://h/x", "batch_size": 0}, "batch_size: must be at least 1"},
		{"empty header name", map[string]any{"url": "ws://h/x", "headers": map[string]any{"": "v"}}, "headers: a header name must not be empty"},
		{"unknown field", map[string]any{"url": "ws://h/x", "mode": "server"}, "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := websocket.NewInput(tc.conf, component.Resources{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "secret"):
				t.Fatalf("error %q shows a credential", err)
			}
		})
	}
}

// TestRedact: credentials and queries never reach logs or errors.
func TestRedact(t *testing.T) {
	in, err := websocket.NewInput(map[string]any{"url": "ws://user:pw@127.0.0.1:1/x?token=secret", "timeout": 1}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	err = in.Connect(testCtx(t))
	if err == nil || strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "secret") ||
		!strings.Contains(err.Error(), "ws://127.0.0.1:1/x") {
		t.Errorf("Connect error %v: want the URL without credentials", err)
	}
}

// TestBadConfig: schema problems are named by their path.
func TestBadConfig(t *testing.T) {
	for _, tc := range []struct{ input, want string }{
		{`{type: websocket}`, "streams[0].input.url"},
		{`{type: websocket, url: "http://x/y"}`, "streams[0].input.url"},
		{`{type: websocket, url: "ws://x/y", timeout: 0}`, "streams[0].input.timeout"},
		{`{type: websocket, url: "ws://x/y", timeout: "5s"}`, "streams[0].input.timeout"},
		{`{type: websocket, url: "ws://x/y", mode: server}`, "streams[0].input.mode"},
		{`{type: websocket, url: "ws://x/y", headers: {A: 1}}`, "streams[0].input.headers.A"},
	} {
		_, err := componenttest.Materialize(`streams:
  - input: ` + tc.input + `
    pipeline: {processors: []}
    output: {type: drop}
`)
		if err == nil || !strings.Contains(err.Error(), tc.want+":") {
			t.Errorf("%s: error %v, want one at %s", tc.input, err, tc.want)
		}
	}
}

// TestExample: the spec's example satisfies the schema and builds.
func TestExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindInput, "websocket")
	conf["headers"] = map[string]any{"Authorization": "Bearer x"} // the secret reference is not resolved here
	in, err := websocket.NewInput(conf, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	_ = in.Close(context.Background())
}

// TestRejectedHandshake: a server that refuses the upgrade fails Connect
// with its HTTP status.
func TestRejectedHandshake(t *testing.T) {
	srv := startServer(t)
	in, err := websocket.NewInput(map[string]any{"url": strings.TrimSuffix(srv.url(), "/ws") + "/nope"}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	if err := in.Connect(testCtx(t)); err == nil || !strings.Contains(err.Error(), "bad handshake (HTTP 404)") {
		t.Errorf("Connect: %v, want a bad handshake with HTTP 404", err)
	}
}
