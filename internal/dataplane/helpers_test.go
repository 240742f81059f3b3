package dataplane

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const testJob = "job-1"

var testSecret = []byte("s3cret-of-the-job")

// testOpts are a node's options for tests: loopback, port 0, short
// heartbeats.
func testOpts(id string, reg prometheus.Registerer) Options {
	return Options{
		Addr:              "127.0.0.1:0",
		NodeID:            id,
		Registerer:        reg,
		HeartbeatInterval: 50 * time.Millisecond,
		HeartbeatTimeout:  time.Second,
	}
}

func startServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := Listen(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pair is two nodes, a (which dials) and b, joined to testJob.
type pair struct {
	a, b   *Server
	ma, mb *Mesh
	reg    *prometheus.Registry
}

func newPair(t testing.TB, mod func(*Options)) *pair {
	t.Helper()
	reg := prometheus.NewRegistry()
	oa, ob := testOpts("a", reg), testOpts("b", reg)
	if mod != nil {
		mod(&oa)
		mod(&ob)
	}
	p := &pair{a: startServer(t, oa), b: startServer(t, ob), reg: reg}
	peers := peersOf(p.a, p.b)
	var err error
	if p.mb, err = p.b.Join(testJob, testSecret, peers); err != nil {
		t.Fatal(err)
	}
	if p.ma, err = p.a.Join(testJob, testSecret, peers); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFor polls cond until it holds or d passed.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func seqFrame(i int) Frame {
	p := binary.BigEndian.AppendUint64(nil, uint64(i))
	return Frame{Kind: KindBatch, Payload: p}
}

func seqOf(t testing.TB, f Frame) int {
	t.Helper()
	if f.Kind != KindBatch || len(f.Payload) != 8 {
		t.Fatalf("frame %v %d bytes, want a batch of 8", f.Kind, len(f.Payload))
	}
	return int(binary.BigEndian.Uint64(f.Payload))
}

// metricValue reads one series from reg; -1 when absent.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return -1
}

// peersOf maps each server's node id to its address and fingerprint, as
// the Hub's job_start does.
func peersOf(ss ...*Server) map[string]Peer {
	out := make(map[string]Peer, len(ss))
	for _, s := range ss {
		out[s.impl.opts.NodeID] = Peer{Addr: s.Addr(), Fingerprint: s.Fingerprint()}
	}
	return out
}

func testIdentity(t testing.TB) *Identity {
	t.Helper()
	id, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// dialAs connects to addr over TLS as a client holding id, pinning the
// server certificate pin; the TLS handshake is done.
func dialAs(t testing.TB, addr string, id *Identity, pin string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(conn, clientTLS(id, pin))
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return tc
}

// rawDial connects to s over TLS as a client holding id and sends a hello
// for job from from to to; it returns the connection and a decoder
// reading it.
func rawDial(t testing.TB, s *Server, id *Identity, job, from, to string) (net.Conn, *decoder, []byte) {
	t.Helper()
	conn := dialAs(t, s.Addr(), id, s.Fingerprint())
	nd := newNonce()
	if err := writeFrame(conn, 0, typeHello, hello{job: job, from: from, to: to, nonce: nd}.payload()); err != nil {
		t.Fatal(err)
	}
	return conn, newDecoder(conn, 1<<20), nd
}

// expectRefusal reads frames until a refuse frame and returns its reason.
func expectRefusal(t testing.TB, dec *decoder) string {
	t.Helper()
	for range 4 {
		h, p, err := dec.next()
		if err != nil {
			t.Fatalf("want a refuse frame, got %v", err)
		}
		if h.typ == typeRefuse {
			return string(p)
		}
	}
	t.Fatal("no refuse frame")
	return ""
}

func isBroken(err error) bool { return errors.Is(err, ErrLinkBroken) }
