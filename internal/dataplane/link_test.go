package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// fakeAcceptor accepts one connection as node "b" of testJob, completes
// the handshake, and hands the connection to then. It returns b's peer
// entry.
func fakeAcceptor(t *testing.T, then func(net.Conn, *decoder)) Peer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	idB := testIdentity(t)
	fake := &mesh{secret: testSecret, peers: map[string]*peer{"a": {}}}
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			return
		}
		defer raw.Close()
		_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
		conn := tls.Server(raw, serverTLS(idB, func(string) bool { return true }))
		dec := newDecoder(conn, 1<<20)
		if _, _, err := acceptHandshake(conn, dec, "b", "", false, func(string) *mesh { return fake }); err != nil {
			t.Errorf("fake acceptor handshake: %v", err)
			return
		}
		_ = raw.SetDeadline(time.Time{})
		then(conn, dec)
	}()
	return Peer{Addr: ln.Addr().String(), Fingerprint: idB.Fingerprint()}
}

// TestHeartbeatTimeout: a peer that completed the handshake and then went
// silent (a frozen process) is noticed within the heartbeat timeout, and
// the streams on its link fail, a sender waiting for credit included.
func TestHeartbeatTimeout(t *testing.T) {
	release := make(chan struct{})
	addr := fakeAcceptor(t, func(net.Conn, *decoder) { <-release })
	defer close(release)
	opts := testOpts("a", nil)
	a := startServer(t, opts)
	ma, err := a.Join(testJob, testSecret, map[string]Peer{"b": addr})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 20*time.Second)
	r, err := ma.Receive("b", "in", "in")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ma.Send(ctx, "b", "out", "out")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sendErr := make(chan error, 1)
	go func() { sendErr <- s.Send(ctx, seqFrame(0)) }() // no credit will come
	_, rerr := r.Recv(ctx)
	serr := <-sendErr
	took := time.Since(start)
	for _, err := range []error{rerr, serr} {
		if !isBroken(err) {
			t.Fatalf("stream error %v, want ErrLinkBroken", err)
		}
	}
	if !strings.Contains(rerr.Error(), "heartbeat") {
		t.Errorf("error %q does not name the heartbeat", rerr)
	}
	if bound := opts.HeartbeatTimeout + 2*time.Second; took > bound {
		t.Fatalf("broken link noticed after %v, want under %v", took, bound)
	}
	if ma.Up("b") {
		st := a.Status().Jobs[0].Links[0]
		t.Fatalf("link still up: %+v", st)
	}
}

// TestProtocolErrors: a frame without credit, a stream on an unknown id,
// or too many unclaimed streams close the link.
func TestProtocolErrors(t *testing.T) {
	tests := []struct {
		name  string
		write func(conn net.Conn)
		want  string
	}{
		{"frame without credit", func(conn net.Conn) {
			b := appendFrame(nil, 1, typeOpen, openPayload("s", "l"))
			b = appendFrame(b, 1, uint8(KindBatch), []byte("x"))
			_, _ = conn.Write(b)
		}, "without credit"},
		{"frame on an unknown stream", func(conn net.Conn) {
			_, _ = conn.Write(appendFrame(nil, 9, uint8(KindBatch), []byte("x")))
		}, "unknown stream"},
		{"too many unclaimed streams", func(conn net.Conn) {
			var b []byte
			for i := range maxUnclaimed + 1 {
				b = appendFrame(b, uint32(i+1), typeOpen, openPayload(fmt.Sprint("s", i), "l"))
			}
			_, _ = conn.Write(b)
		}, "unclaimed"},
		{"frame over MaxFrame", func(conn net.Conn) {
			_, _ = conn.Write(appendHeader(nil, 1<<20+1, 1, uint8(KindBatch)))
		}, "over its limit"},
		{"handshake frame on an up link", func(conn net.Conn) {
			_, _ = conn.Write(appendFrame(nil, 0, typeAccept, nil))
		}, "on an up link"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := testOpts("b", nil)
			o.MaxFrame = 1 << 20
			b := startServer(t, o)
			idA := testIdentity(t)
			mb, err := b.Join(testJob, testSecret, map[string]Peer{"a": {Addr: "127.0.0.1:1", Fingerprint: idA.Fingerprint()}})
			if err != nil {
				t.Fatal(err)
			}
			conn := dialAs(t, b.Addr(), idA, b.Fingerprint())
			dec := newDecoder(conn, 1<<20)
			if err := dialHandshake(conn, dec, testJob, "a", "b", testSecret); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 5*time.Second, "the link up", func() bool { return mb.Up("a") })
			tc.write(conn)
			for {
				if _, _, err := dec.next(); err != nil {
					break // closed by b
				}
			}
			waitFor(t, 5*time.Second, "the link down", func() bool { return !mb.Up("a") })
			st := b.Status().Jobs[0].Links[0]
			if st.State != LinkDown || !strings.Contains(st.LastError, tc.want) {
				t.Fatalf("status %+v, want down with %q", st, tc.want)
			}
		})
	}
}

// TestRedial: the dialer notices its peer's restart, redials the same
// address, and new streams work; streams of the old link failed.
func TestRedial(t *testing.T) {
	p := newPair(t, nil)
	ctx := ctxT(t, 30*time.Second)
	oldR, err := p.ma.Receive("b", "old", "e")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the link up", func() bool { return p.ma.Up("b") })
	addrB := p.b.Addr()
	_ = p.b.Close()
	if _, err := oldR.Recv(ctx); !isBroken(err) {
		t.Fatalf("stream of the old link: %v, want ErrLinkBroken", err)
	}
	waitFor(t, 5*time.Second, "the link down", func() bool { return !p.ma.Up("b") })
	if st := p.a.Status().Jobs[0].Links[0]; st.State != LinkDown || st.LastError == "" {
		t.Fatalf("status after the peer left: %+v", st)
	}
	// Claimed while down: binds to the next link.
	newR, err := p.ma.Receive("b", "new", "e")
	if err != nil {
		t.Fatal(err)
	}

	ob := testOpts("b", nil)
	ob.Addr, ob.Identity = addrB, p.b.impl.opts.Identity // a restart keeps the key
	var b2 *Server
	waitFor(t, 5*time.Second, "the port free again", func() bool {
		b2, err = Listen(ob)
		return err == nil
	})
	defer b2.Close()
	mb2, err := b2.Join(testJob, testSecret, peersOf(p.a, b2))
	if err != nil {
		t.Fatal(err)
	}
	sendCtx, cancel := context.WithTimeout(ctx, 5*time.Second) // backoff is capped at 2 s
	defer cancel()
	s, err := mb2.Send(sendCtx, "a", "new", "e")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, seqFrame(42)); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	f, err := newR.Recv(ctx)
	if err != nil || seqOf(t, f) != 42 {
		t.Fatalf("stream of the new link: %v", err)
	}
	if _, err := newR.Recv(ctx); err != io.EOF {
		t.Fatalf("end of the new stream: %v", err)
	}
	if st := p.a.Status().Jobs[0].Links[0]; st.State != LinkUp {
		t.Fatalf("status after the redial: %+v", st)
	}
}

// TestMeshRejoin: joining a job again closes its old mesh; its streams
// fail with ErrClosed.
func TestMeshRejoin(t *testing.T) {
	p := newPair(t, nil)
	r, err := p.mb.Receive("a", "x", "e")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.b.Join(testJob, testSecret, peersOf(p.a)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Recv(ctxT(t, 5*time.Second)); !errors.Is(err, ErrClosed) {
		t.Fatalf("stream of the replaced mesh: %v, want ErrClosed", err)
	}
	if n := len(p.b.Status().Jobs); n != 1 {
		t.Fatalf("%d meshes after the rejoin, want 1", n)
	}
}
