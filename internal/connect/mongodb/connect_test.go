package mongodb_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/connect/mongodb"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/stream"
)

// closedPort returns a loopback port nothing listens on: the OS gave it
// to a listener that is closed again.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestConnectServerDown: with no server, Connect fails with an error that
// names the server (not the password) and is not permanent, within the
// server selection timeout rather than the caller's deadline; it can be
// called again, Write refuses to run unconnected, and Close works.
func TestConnectServerDown(t *testing.T) {
	port := closedPort(t)
	out, err := mongodb.NewOutput(map[string]any{
		"uri":                      fmt.Sprintf("mongodb://app:s3cret@127.0.0.1:%d/?authSource=admin", port),
		"database":                 "d",
		"collection":               "c",
		"server_selection_timeout": "300ms",
	}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("mongodb: ping mongodb://127.0.0.1:%d: server selection error", port)
	for attempt := 1; attempt <= 2; attempt++ {
		ctx := testCtx(t)
		err := out.Connect(ctx)
		if attempt == 1 {
			t.Logf("Connect with the server down: %v", err)
		}
		switch {
		case err == nil:
			t.Fatalf("attempt %d: Connect succeeded with no server", attempt)
		case !strings.Contains(err.Error(), want):
			t.Errorf("attempt %d: error %q, want one containing %q", attempt, err, want)
		case strings.Contains(err.Error(), "s3cret"):
			t.Errorf("attempt %d: the error shows the password: %v", attempt, err)
		case component.IsPermanent(err):
			t.Errorf("attempt %d: a server that is down is marked permanent: %v", attempt, err)
		case ctx.Err() != nil:
			t.Errorf("attempt %d: Connect ran into the caller's deadline instead of its own: %v", attempt, err)
		}
	}
	b := message.Batch{Messages: []message.Message{message.New([]byte(`{"a":1}`))}}
	if err := out.Write(testCtx(t), b); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Errorf("Write after a failed Connect: %v", err)
	}
	for range 2 {
		if err := out.Close(testCtx(t)); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

// TestStreamWaitsForServer: in a stream, an output whose server is down
// keeps the stream starting and not ready, with the Connect error (and no
// password) as its last error, while the runtime retries.
func TestStreamWaitsForServer(t *testing.T) {
	port := closedPort(t)
	e := componenttest.Engine(t, fmt.Sprintf(`streams:
  - id: m
    input: {type: memory, messages: ['{"id":1}']}
    pipeline: {processors: []}
    output:
      type: mongodb
      uri: "mongodb://app:s3cret@127.0.0.1:%d"
      database: arkflow
      collection: events
      mode: upsert
      key_fields: [id]
      server_selection_timeout: 200ms
`, port))
	componenttest.WaitFor(t, "two failed connects", 20*time.Second, func() bool {
		return componenttest.Stream(t, e, "m").Errors >= 2
	})
	s := componenttest.Stream(t, e, "m")
	if s.State != stream.StateStarting || e.Ready() || s.Sent != 0 {
		t.Errorf("server down: state %s, ready %v, sent %d", s.State, e.Ready(), s.Sent)
	}
	if !strings.Contains(s.LastError, "mongodb: ping") || strings.Contains(s.LastError, "s3cret") {
		t.Errorf("last error %q, want the ping error without the password", s.LastError)
	}
}
