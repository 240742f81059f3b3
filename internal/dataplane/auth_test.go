package dataplane

import (
	"bytes"
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
	peers := map[string]string{"a": a.Addr(), "b": b.Addr()}
	if _, err := b.Join(testJob, []byte("the-right-secret"), peers); err != nil {
		t.Fatal(err)
	}
	ma, err := a.Join(testJob, []byte("a-wrong-secret"), peers)
	if err != nil {
		t.Fatal(err)
	}
	// The dialer checks the acceptor's proof first and refuses it; the
	// acceptor counts the refusal it got.
	waitFor(t, 5*time.Second, "both ends to count bad_secret", func() bool {
		return refusedCount(t, regA, reasonBadSecret) >= 1 && refusedCount(t, regB, reasonBadSecret) >= 1
	})
	if ma.Up("b") {
		t.Error("a link came up with mismatched secrets")
	}
	if got := a.Status().Refused; got < 1 {
		t.Errorf("Status().Refused = %d", got)
	}
	st := a.Status().Jobs[0].Links[0]
	if st.State != LinkConnecting || !strings.Contains(st.LastError, "secret") {
		t.Errorf("link status %+v, want connecting with a secret error", st)
	}
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

func TestAcceptorRefuses(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := startServer(t, testOpts("b", reg))
	if _, err := b.Join(testJob, testSecret, map[string]string{"a": "127.0.0.1:1", "b": b.Addr()}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, job, from, to string
		wrongProof          bool
		want                string
	}{
		{name: "unknown job", job: "other-job", from: "a", to: "b", want: reasonUnknownJob},
		{name: "unknown node", job: testJob, from: "0-intruder", to: "b", want: reasonUnknownNode},
		{name: "addressed to another node", job: testJob, from: "a", to: "c", want: reasonUnknownNode},
		{name: "wrong proof", job: testJob, from: "a", to: "b", wrongProof: true, want: reasonBadSecret},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := refusedCount(t, reg, tc.want)
			conn, dec, _ := rawDial(t, b.Addr(), tc.job, tc.from, tc.to)
			if tc.wrongProof {
				if _, err := expect(dec, typeChallenge); err != nil {
					t.Fatal(err)
				}
				if err := writeFrame(conn, 0, typeProof, make([]byte, proofLen)); err != nil {
					t.Fatal(err)
				}
			}
			if got := expectRefusal(t, dec); got != tc.want {
				t.Fatalf("refused with %q, want %q", got, tc.want)
			}
			if _, _, err := dec.next(); err == nil {
				t.Fatal("the connection stayed open after the refusal")
			}
			waitFor(t, 5*time.Second, "the refusal counted", func() bool {
				return refusedCount(t, reg, tc.want) == max(before, 0)+1
			})
		})
	}
	t.Run("protocol", func(t *testing.T) {
		conn, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		// A data frame claiming 64 MiB, before any handshake.
		if _, err := conn.Write(appendHeader(nil, 64<<20, 1, uint8(KindBatch))); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1)
		for {
			if _, err := conn.Read(buf); err != nil {
				break
			}
		}
		waitFor(t, 5*time.Second, "the refusal counted", func() bool {
			return refusedCount(t, reg, reasonProtocol) == 1
		})
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
	got := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
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
	reg := prometheus.NewRegistry()
	a := startServer(t, testOpts("a", reg))
	if _, err := a.Join(testJob, testSecret, map[string]string{"b": ln.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-got:
		if !strings.Contains(msg, reasonBadSecret) {
			t.Fatalf("the fake acceptor got %q, want a bad_secret refusal", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer from the dialer")
	}
	waitFor(t, 5*time.Second, "the refusal counted", func() bool {
		return refusedCount(t, reg, reasonBadSecret) >= 1
	})
}

func TestHandshakeDeadline(t *testing.T) {
	b := startServer(t, testOpts("b", nil))
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
	waitFor(t, 5*time.Second, "the refusal counted", func() bool { return b.Status().Refused == 1 })
}
