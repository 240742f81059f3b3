package wal

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func FuzzDecodeBatch(f *testing.F) {
	good, err := EncodeBatch(nil, sampleBatch())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{batchVersion, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBatch(data)
		if err != nil {
			return
		}
		again, err := EncodeBatch(nil, b)
		if err != nil {
			t.Fatalf("re-encoding a decoded batch: %v", err)
		}
		b2, err := DecodeBatch(again)
		if err != nil {
			t.Fatalf("decoding a re-encoded batch: %v", err)
		}
		if diff := cmp.Diff(views(t, b), views(t, b2)); diff != "" {
			t.Errorf("decode(encode(decode(x))) differs (-first +second):\n%s", diff)
		}
	})
}

// validSegment returns the bytes of a real segment holding a few entries
// and acks.
func validSegment(f *testing.F) []byte {
	dir := f.TempDir()
	w, _, err := Open(Options{Dir: dir})
	if err != nil {
		f.Fatal(err)
	}
	for i := range uint64(4) {
		if _, err := w.Append(context.Background(), payloadFor(i+1)); err != nil {
			f.Fatal(err)
		}
	}
	if err := w.Ack(2); err != nil {
		f.Fatal(err)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(segPath(dir, 1))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzOpen writes arbitrary bytes as the only segment: Open must not panic
// or fail, Replay must succeed, and a second Open must find nothing more to
// repair and the same entries.
func FuzzOpen(f *testing.F) {
	seg := validSegment(f)
	f.Add(seg)
	f.Add(seg[:len(seg)-3])
	f.Add(bytes.Repeat([]byte{0}, 64))
	f.Add([]byte{})
	f.Fuzz(checkOpens)
}

// FuzzOpenRecords frames the fuzzer's bytes as records with correct
// checksums, so that recovery's checks beyond the CRC (sequence order, ack
// and checkpoint payloads) are explored. Each record is taken as
// [kind][seq delta][payload length] followed by the payload.
func FuzzOpenRecords(f *testing.F) {
	ck := appendCheckpointPayload(nil, 1, nil)
	f.Add(append([]byte{kindCheckpoint, 0, byte(len(ck))}, ck...))
	f.Add([]byte{kindEntry, 1, 2, 'h', 'i', kindEntry, 1, 0, kindAck, 0, 2, 1, 1})
	f.Add([]byte{kindEntry, 1, 0, kindEntry, 3, 0, kindCheckpoint, 0, 4, 3, 1, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		var seg []byte
		var seq uint64
		for len(data) >= 3 {
			kind, delta, n := data[0], uint64(data[1]), int(data[2])
			data = data[3:]
			n = min(n, len(data))
			p := data[:n]
			data = data[n:]
			seq += delta
			s := seq
			if kind != kindEntry {
				s = 0
			}
			seg = appendRecord(seg, kind, s, payloadCRC(p), p)
		}
		checkOpens(t, seg)
	})
}

// checkOpens writes data as the only segment and checks that Open never
// fails on it, that Replay succeeds, and that a second Open finds nothing
// more to repair and the same entries.
func checkOpens(t *testing.T, data []byte) {
	dir := t.TempDir()
	if err := os.WriteFile(segPath(dir, 1), data, 0o644); err != nil {
		t.Fatal(err)
	}
	w, rec, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if rec.CorruptSegment != "" || rec.TruncatedBytes > int64(len(data)) {
		t.Errorf("Recovery = %+v for a %d-byte last segment", rec, len(data))
	}
	first := replayAll(t, w)
	if len(first) != rec.Pending {
		t.Errorf("replayed %d entries, Recovery.Pending = %d", len(first), rec.Pending)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, rec2, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	defer w.Close()
	if rec2.TruncatedBytes != 0 || rec2.Pending != rec.Pending {
		t.Errorf("second Recovery = %+v after %+v", rec2, rec)
	}
	if diff := cmp.Diff(first, replayAll(t, w)); diff != "" {
		t.Errorf("second replay differs (-first +second):\n%s", diff)
	}
}
