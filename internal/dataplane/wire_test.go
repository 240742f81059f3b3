package dataplane

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// recordingProxy forwards one TCP connection at a time to target and
// keeps every byte the dialer sent.
type recordingProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	sent   bytes.Buffer // dialer → target
}

func newRecordingProxy(t *testing.T, target string) *recordingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			go func() {
				_, _ = io.Copy(io.MultiWriter(p, out), in) // recorded before forwarded: the test reads the record once the receiver has the frame
				_ = out.Close()
			}()
			go func() {
				_, _ = io.Copy(in, out)
				_ = in.Close()
			}()
		}
	}()
	return p
}

func (p *recordingProxy) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent.Write(b)
}

func (p *recordingProxy) bytes() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.sent.Bytes())
}

// TestRecordNotReadableOnTheWire runs a link through a proxy that records
// what crosses it and sends a record batch: with TLS (always, outside this
// package's tests) the record is not in the bytes and they start with a
// TLS handshake record; with TLS turned off it is, so the test can see it.
func TestRecordNotReadableOnTheWire(t *testing.T) {
	record := []byte(`{"card":"4111-1111-1111-1111","note":"a record anyone on the path could read"}`)
	for _, plain := range []bool{false, true} {
		name := map[bool]string{false: "tls", true: "plaintext"}[plain]
		t.Run(name, func(t *testing.T) {
			oa, ob := testOpts("a", nil), testOpts("b", nil)
			oa.plaintext, ob.plaintext = plain, plain
			a, b := startServer(t, oa), startServer(t, ob)
			proxy := newRecordingProxy(t, b.Addr())
			peers := peersOf(a, b)
			via := peers["b"]
			via.Addr = proxy.ln.Addr().String() // a dials b through the proxy
			mb, err := b.Join(testJob, testSecret, peers)
			if err != nil {
				t.Fatal(err)
			}
			ma, err := a.Join(testJob, testSecret, map[string]Peer{"b": via})
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t, 20*time.Second)
			r, err := mb.Receive("a", "edge", "edge")
			if err != nil {
				t.Fatal(err)
			}
			s, err := ma.Send(ctx, "b", "edge", "edge")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(ctx, Frame{Kind: KindBatch, Payload: record}); err != nil {
				t.Fatal(err)
			}
			f, err := r.Recv(ctx)
			if err != nil || !bytes.Equal(f.Payload, record) {
				t.Fatalf("received %q, %v", f.Payload, err)
			}
			wire := proxy.bytes()
			if len(wire) < 6 {
				t.Fatalf("the proxy recorded %d bytes", len(wire))
			}
			readable := bytes.Contains(wire, record) || bytes.Contains(wire, []byte("4111-1111"))
			if readable != plain {
				t.Fatalf("record readable on the wire: %v, want %v (%d bytes recorded)", readable, plain, len(wire))
			}
			// A TLS record of type handshake (22) whose first message is a
			// ClientHello (1).
			hello := wire[0] == 22 && wire[1] == 3 && wire[5] == 1
			if hello == plain {
				t.Fatalf("first bytes % x: TLS ClientHello %v, want %v", wire[:6], hello, !plain)
			}
			for _, secret := range [][]byte{testSecret, []byte(testJob)} {
				if !plain && bytes.Contains(wire, secret) {
					t.Fatalf("%q crossed the wire in clear", secret)
				}
			}
		})
	}
}
