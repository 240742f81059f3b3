package dataplane

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func refusedCount(t testing.TB, reg *prometheus.Registry, reason string) float64 {
	return metricValue(t, reg, "svc_dataplane_connections_refused_total", map[string]string{"reason": reason})
}

func TestMismatchedSecretsRefused(t *testing.T) {
	var logs syncBuffer
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	oa, ob := testOpts("a", regA), testOpts("b", regB)
	oa.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ob.Logger = oa.Logger
	a, b := startServer(t, oa), startServer(t, ob)
	peers := peersOf(a, b)
	if _, err := b.Join(testJob, []byte("the-right-secret"), peers); err != nil {
		t.Fatal(err)
	}
	ma, err := a.Join(testJob, []byte("a-wrong-secret"), peers)
	if err != nil {
		t.Fatal(err)
	}
	// The dialer checks the acceptor's proof first and refuses it; the
	// acceptor counts the refusal it got.
	waitFor(t, 5*time.Second, "the acceptor to count bad_secret", func() bool {
		return refusedCount(t, regB, reasonBadSecret) >= 1
	})
	if ma.Up("b") {
		t.Error("a link came up with mismatched secrets")
	}
	if got := b.Status().Refused; got < 1 {
		t.Errorf("Status().Refused = %d", got)
	}
	waitFor(t, 5*time.Second, "the dialer's link error", func() bool {
		st := a.Status().Jobs[0].Links[0]
		return st.State == LinkConnecting && strings.Contains(st.LastError, "secret")
	})
	out := logs.String()
	if !strings.Contains(out, "refused") {
		t.Errorf("refusal not logged: %s", out)
	}
	for _, s := range []string{"the-right-secret", "a-wrong-secret"} {
		if strings.Contains(out, s) {
			t.Fatalf("the secret %q was logged", s)
		}
	}
}

// TestAcceptorRefuses: a client that passed TLS with a pinned certificate
// but names a job not joined, a node it is not, or proves a wrong secret
// is refused, and every refusal is the same bytes: a challenge, then
// "refused" after its proof. Only the counter's reason tells them apart.
func TestAcceptorRefuses(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := startServer(t, testOpts("b", reg))
	idA, idC := testIdentity(t), testIdentity(t)
	peers := map[string]Peer{"a": {Addr: "127.0.0.1:1", Fingerprint: idA.Fingerprint()}, "c": {Addr: "127.0.0.1:1", Fingerprint: idC.Fingerprint()}}
	if _, err := b.Join(testJob, testSecret, peers); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, job, from, to string
		id                  *Identity
		secret              []byte
		want                string
	}{
		{name: "unknown job", job: "other-job", from: "a", to: "b", id: idA, secret: testSecret, want: reasonUnknownJob},
		{name: "unknown node", job: testJob, from: "0-intruder", to: "b", id: idA, secret: testSecret, want: reasonUnknownNode},
		{name: "addressed to another node", job: testJob, from: "a", to: "d", id: idA, secret: testSecret, want: reasonUnknownNode},
		{name: "another peer's certificate", job: testJob, from: "a", to: "b", id: idC, secret: testSecret, want: reasonUnknownNode},
		{name: "wrong secret", job: testJob, from: "a", to: "b", id: idA, secret: []byte("not the secret"), want: reasonBadSecret},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := max(refusedCount(t, reg, tc.want), 0)
			conn, dec, nd := rawDial(t, b, tc.id, tc.job, tc.from, tc.to)
			p, err := expect(dec, typeChallenge)
			if err != nil {
				t.Fatalf("want a challenge whatever the reason, got %v", err)
			}
			na := p[:nonceLen]
			// The dialer's check of the acceptor's proof is skipped here:
			// it sends its proof as if it were satisfied.
			if err := writeFrame(conn, 0, typeProof, proof(tc.secret, nd, na, tc.job, tc.from, tc.to)); err != nil {
				t.Fatal(err)
			}
			if got := expectRefusal(t, dec); got != refusedWire {
				t.Fatalf("refused with %q, want the uniform %q", got, refusedWire)
			}
			if _, _, err := dec.next(); err == nil {
				t.Fatal("the connection stayed open after the refusal")
			}
			waitFor(t, 5*time.Second, "the refusal counted", func() bool {
				return refusedCount(t, reg, tc.want) == before+1
			})
		})
	}
}

// TestPinning: TLS pins both ends. A client without a certificate, or
// with one no joined job pins, never reaches the job handshake; a server
// presenting another key than the one pinned is refused by the dialer,
// which never sends it a byte of the handshake.
func TestPinning(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := startServer(t, testOpts("b", reg))
	idA := testIdentity(t)
	if _, err := b.Join(testJob, testSecret, map[string]Peer{"a": {Addr: "127.0.0.1:1", Fingerprint: idA.Fingerprint()}}); err != nil {
		t.Fatal(err)
	}
	clients := []struct {
		name string
		cfg  *tls.Config
	}{
		{"no client certificate", &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}},
		{"an unpinned certificate", clientTLS(testIdentity(t), b.Fingerprint())},
		{"TLS 1.2", func() *tls.Config {
			c := clientTLS(idA, b.Fingerprint())
			c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
			return c
		}()},
	}
	for i, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", b.Addr(), 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			tc := tls.Client(conn, c.cfg)
			// In TLS 1.3 the client finishes first; the server's verdict on
			// its certificate comes as an alert at the first read.
			err = tc.Handshake()
			if err == nil {
				_ = writeFrame(tc, 0, typeHello, hello{job: testJob, from: "a", to: "b", nonce: newNonce()}.payload())
				_, err = tc.Read(make([]byte, 64))
			}
			if err == nil {
				t.Fatal("the listener answered a client it does not pin")
			}
			waitFor(t, 5*time.Second, "the refusal counted", func() bool { return refusedCount(t, reg, reasonTLS) == float64(i+1) })
		})
	}
	t.Run("server with another key", func(t *testing.T) {
		impostor := testOpts("b", nil)
		impostor.Identity = testIdentity(t)
		fake := startServer(t, impostor)
		pinned := Peer{Addr: fake.Addr(), Fingerprint: b.Fingerprint()} // b's pin, the impostor's address
		a := startServer(t, testOpts("a", nil))
		ma, err := a.Join(testJob, testSecret, map[string]Peer{"b": pinned})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fake.Join(testJob, testSecret, peersOf(a)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the dialer's TLS error", func() bool {
			st := a.Status().Jobs[0].Links[0]
			return strings.Contains(st.LastError, "pinned")
		})
		if ma.Up("b") {
			t.Fatal("a link came up with a server presenting another key")
		}
	})
	t.Run("a peer without a fingerprint", func(t *testing.T) {
		_, err := b.Join("job-2", testSecret, map[string]Peer{"a": {Addr: "127.0.0.1:1"}})
		if err == nil || !strings.Contains(err.Error(), "fingerprint") {
			t.Fatalf("Join with a peer without a fingerprint: %v", err)
		}
	})
}

// TestDialerChecksAcceptorProof: an acceptor that does not hold the secret
// is refused by the dialer before the dialer proves anything.
func TestDialerChecksAcceptorProof(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	idB := testIdentity(t)
	got := make(chan string, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			return
		}
		defer raw.Close()
		_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
		conn := tls.Server(raw, serverTLS(idB, func(string) bool { return true }))
		dec := newDecoder(conn, 0)
		p, err := expect(dec, typeHello)
		if err != nil {
			got <- err.Error()
			return
		}
		h, _ := parseHello(p)
		na := newNonce()
		// A proof under a guessed secret.
		_ = writeFrame(conn, 0, typeChallenge, append(na, proof([]byte("guess"), h.nonce, na, h.job, "b", "a")...))
		_, err = expect(dec, typeProof)
		got <- err.Error()
	}()
	a := startServer(t, testOpts("a", nil))
	if _, err := a.Join(testJob, testSecret, map[string]Peer{"b": {Addr: ln.Addr().String(), Fingerprint: idB.Fingerprint()}}); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-got:
		if !strings.Contains(msg, refusedWire) {
			t.Fatalf("the fake acceptor got %q, want a refusal", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer from the dialer")
	}
	waitFor(t, 5*time.Second, "the dialer's link error", func() bool {
		return strings.Contains(a.Status().Jobs[0].Links[0].LastError, "secret")
	})
}

func TestHandshakeDeadline(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := startServer(t, testOpts("b", reg))
	conn, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Silent: the acceptor gives up after handshakeTimeout.
	_ = conn.SetReadDeadline(time.Now().Add(handshakeTimeout + 5*time.Second))
	start := time.Now()
	buf := make([]byte, 64)
	for {
		if _, err := conn.Read(buf); err != nil {
			break
		}
	}
	if d := time.Since(start); d > handshakeTimeout+3*time.Second {
		t.Fatalf("a silent connection was kept %v", d)
	}
	waitFor(t, 5*time.Second, "the refusal counted", func() bool { return refusedCount(t, reg, reasonTimeout) == 1 })
}
