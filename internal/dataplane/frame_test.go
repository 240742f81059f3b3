package dataplane

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

const fuzzMaxFrame = 1 << 16

// frameSeeds are valid and hostile inputs for the fuzz targets.
func frameSeeds() [][]byte {
	h := hello{job: testJob, from: "a", to: "b", nonce: make([]byte, nonceLen)}
	var all []byte
	for _, f := range [][]byte{
		appendFrame(nil, 1, typeOpen, openPayload("s0", "edge")),
		appendFrame(nil, 1, uint8(KindBatch), []byte("records")),
		appendFrame(nil, 1, uint8(KindWatermark), []byte{0, 0, 0, 1}),
		appendFrame(nil, 1, typeClose, nil),
	} {
		all = append(all, f...)
	}
	return [][]byte{
		all,
		appendFrame(nil, 0, typeHello, h.payload()),
		appendFrame(nil, 0, typeChallenge, make([]byte, nonceLen+proofLen)),
		appendFrame(nil, 0, typeProof, make([]byte, proofLen)),
		appendFrame(nil, 0, typeAccept, nil),
		appendFrame(nil, 3, typeCredit, uint32Payload(16)),
		appendFrame(nil, 3, typeRelease, nil),
		appendFrame(nil, 0, typeHeartbeat, nil),
		appendFrame(nil, 0, typeRefuse, []byte("bad_secret\x00\xff")),
		appendFrame(nil, 2, uint8(KindControl), bytes.Repeat([]byte{7}, 300)),
		appendHeader(nil, 1<<31, 1, uint8(KindBatch)),          // hostile length
		appendHeader(nil, 0xffffffff, 0, typeHello),            // hostile handshake length
		appendHeader(nil, 5, 1, typeCredit),                    // credit of the wrong size
		appendFrame(nil, 1, typeOpen, []byte{0xff, 0xff, 'x'}), // string longer than its frame
		appendFrame(nil, 1, 0x99, nil),                         // unknown type
		appendFrame(nil, 1, uint8(KindBatch), nil)[:5],         // truncated header
		appendHeader(nil, 100, 1, uint8(KindBatch)),            // truncated payload
		{},
	}
}

// FuzzFrame decodes arbitrary bytes as a link and as a handshake would: no
// panic, and no payload beyond the bounds of its frame type.
func FuzzFrame(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, maxFrame := range []int{0, fuzzMaxFrame} {
			dec := newDecoder(bytes.NewReader(data), maxFrame)
			for range 1000 {
				h, err := dec.readHeader()
				if err != nil {
					break
				}
				limit := maxPayload(h.typ, maxFrame)
				if limit < 0 || int64(h.n) > int64(limit) {
					t.Fatalf("header %+v accepted over limit %d", h, limit)
				}
				p, err := dec.readPayload(h)
				if err != nil {
					if !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Fatalf("payload error %v", err)
					}
					break
				}
				if len(p) != int(h.n) {
					t.Fatalf("payload of %d bytes, header says %d", len(p), h.n)
				}
				checkPayload(t, h.typ, p)
			}
		}
	})
}

// checkPayload parses p as its type's payload; what parses re-encodes to
// the same bytes.
func checkPayload(t *testing.T, typ uint8, p []byte) {
	switch typ {
	case typeOpen:
		name, label, err := parseOpen(p)
		if err == nil && !bytes.Equal(openPayload(name, label), p) {
			t.Fatalf("open %q %q does not round-trip", name, label)
		}
	case typeCredit:
		n, err := parseCredit(p)
		if err != nil || !bytes.Equal(uint32Payload(n), p) {
			t.Fatalf("credit %d: %v", n, err)
		}
	case typeHello:
		h, err := parseHello(p)
		if err == nil && !bytes.Equal(h.payload(), p) {
			t.Fatalf("hello %+v does not round-trip", h)
		}
	case typeRefuse:
		if s := printable(p); len(s) > maxReason {
			t.Fatalf("reason of %d bytes", len(s))
		}
	}
}

// FuzzLink feeds arbitrary bytes to an up link's reader, with streams
// claimed by name s0 to s2: no panic, and it ends with an error.
func FuzzLink(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		srv := &server{opts: withDefaults(Options{NodeID: "b", Credits: 2, MaxFrame: fuzzMaxFrame}), met: newMetrics(nil)}
		srv.log = srv.opts.Logger
		m := &mesh{srv: srv, job: testJob}
		p := &peer{m: m, id: "a", pending: map[string]*receiver{}}
		m.peers = map[string]*peer{"a": p}
		l := newLink(p, discardConn{}, newDecoder(bytes.NewReader(data), fuzzMaxFrame), &srv.opts)
		for _, name := range []string{"s0", "s1", "s2"} {
			if err := l.claim(newReceiver(m, "a", name, "edge", true)); err != nil {
				t.Fatal(err)
			}
		}
		l.readLoop()
		if !errors.Is(l.broken(), ErrLinkBroken) {
			t.Fatalf("reader ended with %v", l.broken())
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, r := range l.in {
			if r.claimed && r.n > srv.opts.Credits {
				t.Fatalf("stream %q holds %d frames", r.name, r.n)
			}
		}
	})
}

// discardConn is a connection whose writes vanish.
type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }
func (discardConn) Close() error                { return nil }
