package nats_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/stream"

	_ "github.com/flowplane/flowplane/internal/connect/input"
	_ "github.com/flowplane/flowplane/internal/connect/output"
	_ "github.com/flowplane/flowplane/internal/connect/processor"
)

// natsServer is a nats-server embedded in the test, with JetStream on a
// store directory, that can be stopped and started again on the same port
// with the same store.
type natsServer struct {
	t     testing.TB
	port  int
	store string
	s     *server.Server
}

// freePort returns a loopback port nothing listens on (for now).
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func newServer(t testing.TB, port int) *natsServer {
	t.Helper()
	ns := &natsServer{t: t, port: port, store: t.TempDir()}
	t.Cleanup(ns.stop)
	return ns
}

// startServer starts a server on a free port.
func startServer(t testing.TB) *natsServer {
	ns := newServer(t, freePort(t))
	ns.start()
	return ns
}

func (ns *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", ns.port) }

func (ns *natsServer) start() {
	ns.t.Helper()
	opts := &server.Options{
		Host: "127.0.0.1", Port: ns.port, JetStream: true, StoreDir: ns.store,
		NoLog: true, NoSigs: true, ServerName: "test",
	}
	s, err := server.NewServer(opts)
	if err != nil {
		ns.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		ns.t.Fatal("nats-server did not start")
	}
	ns.s = s
}

func (ns *natsServer) stop() {
	if ns.s != nil {
		ns.s.Shutdown()
		ns.s.WaitForShutdown()
		ns.s = nil
	}
}

// client connects the test itself; it reconnects across restarts.
func (ns *natsServer) client() (*natsgo.Conn, jetstream.JetStream) {
	ns.t.Helper()
	nc, err := natsgo.Connect(ns.url(), natsgo.MaxReconnects(-1), natsgo.ReconnectWait(100*time.Millisecond))
	if err != nil {
		ns.t.Fatal(err)
	}
	ns.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		ns.t.Fatal(err)
	}
	return nc, js
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createStream(t testing.TB, js jetstream.JetStream, name string, subjects ...string) jetstream.Stream {
	t.Helper()
	s, err := js.CreateStream(testCtx(t), jetstream.StreamConfig{
		Name: name, Subjects: subjects, Storage: jetstream.FileStorage, Duplicates: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// publish stores n messages {"id": i} for i in [from, from+n) on subject,
// each with a Nats-Msg-Id so that a retried publish is not stored twice.
func publish(t testing.TB, js jetstream.JetStream, subject string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		for attempt := 0; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := js.Publish(ctx, subject, fmt.Appendf(nil, `{"id":%d}`, i), jetstream.WithMsgID(fmt.Sprint("p-", i)))
			cancel()
			if err == nil {
				break
			}
			if attempt > 200 {
				t.Errorf("publish %d: %v", i, err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// streamIDs reads every message of a stream and returns how many it holds
// and how many times each id occurs.
func streamIDs(t testing.TB, js jetstream.JetStream, name string) (int, map[string]int) {
	t.Helper()
	ctx := testCtx(t)
	c, err := js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	total := int(st.CachedInfo().State.Msgs)
	ids := map[string]int{}
	for got := 0; got < total; {
		b, err := c.Fetch(total-got, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range b.Messages() {
			ids[idOf(m.Data())]++
			n++
		}
		if n == 0 {
			t.Fatalf("stream %s: read %d of %d messages", name, got, total)
		}
		got += n
	}
	return total, ids
}

func idOf(b []byte) string {
	s := string(b)
	s = strings.TrimPrefix(s, `{"id":`)
	return strings.TrimSuffix(s, "}")
}

func streamMsgs(t testing.TB, js jetstream.JetStream, name string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, name)
	if err != nil {
		return -1 // the server may be restarting
	}
	return int(st.CachedInfo().State.Msgs)
}

func status(t testing.TB, e *engine.Engine, id string) stream.Status {
	t.Helper()
	return componenttest.Stream(t, e, id).Status
}

func lines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
