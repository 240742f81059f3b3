package wal

import (
	"context"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tornBase writes five entries in one segment and returns the directory,
// the segment's path and the offset where the last record starts.
func tornBase(t *testing.T) (dir, path string, start int64) {
	t.Helper()
	dir = t.TempDir()
	w, _ := openT(t, dir, Options{})
	appendSeqs(t, w, 1, 5)
	mustClose(t, w)
	path = segPath(dir, 1)
	size := fileSize(t, path)
	return dir, path, size - int64(headerSize+len(payloadFor(5)))
}

// TestTornTail cuts the last record at every offset: Open must keep the four
// earlier entries, drop the partial record and report the bytes dropped.
func TestTornTail(t *testing.T) {
	src, path, start := tornBase(t)
	size := fileSize(t, path)
	for off := start; off < size; off++ {
		dir := copyDir(t, src)
		if err := os.Truncate(segPath(dir, 1), off); err != nil {
			t.Fatal(err)
		}
		w, rec, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatalf("truncated at %d: Open: %v", off, err)
		}
		want := Recovery{Pending: 4, PendingBytes: payloadBytes(1, 2, 3, 4), TruncatedBytes: off - start}
		if diff := cmp.Diff(want, rec); diff != "" {
			t.Errorf("truncated at %d: Recovery (-want +got):\n%s", off, diff)
		}
		if diff := cmp.Diff(entriesFor(1, 2, 3, 4), replayAll(t, w)); diff != "" {
			t.Errorf("truncated at %d: replayed (-want +got):\n%s", off, diff)
		}
		// The torn entry was never durable: its seq is handed out again.
		if seq, err := w.Append(context.Background(), payloadFor(5)); err != nil || seq != 5 {
			t.Errorf("truncated at %d: Append = %d, %v; want 5", off, seq, err)
		}
		mustClose(t, w)
		w, rec = openT(t, dir, Options{})
		if diff := cmp.Diff(Recovery{Pending: 5, PendingBytes: payloadBytes(1, 2, 3, 4, 5)}, rec); diff != "" {
			t.Errorf("truncated at %d: second Recovery (-want +got):\n%s", off, diff)
		}
		mustClose(t, w)
	}
}

// TestFlippedByteInLastRecord damages each byte of the last record in turn.
func TestFlippedByteInLastRecord(t *testing.T) {
	src, path, start := tornBase(t)
	size := fileSize(t, path)
	for off := start; off < size; off++ {
		dir := copyDir(t, src)
		p := segPath(dir, 1)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[off] ^= 0x5a
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		w, rec, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatalf("flipped byte %d: Open: %v", off, err)
		}
		want := Recovery{Pending: 4, PendingBytes: payloadBytes(1, 2, 3, 4), TruncatedBytes: size - start}
		if diff := cmp.Diff(want, rec); diff != "" {
			t.Errorf("flipped byte %d: Recovery (-want +got):\n%s", off, diff)
		}
		if diff := cmp.Diff(entriesFor(1, 2, 3, 4), replayAll(t, w)); diff != "" {
			t.Errorf("flipped byte %d: replayed (-want +got):\n%s", off, diff)
		}
		mustClose(t, w)
	}
}

// TestCorruptOlderSegment damages entry 2 in the first of three segments.
// Recovery keeps entry 1 and the later segments, names the damaged file and
// leaves it alone until its surviving entry is acknowledged.
func TestCorruptOlderSegment(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 300} // two 100-byte entries per segment
	w, _ := openT(t, dir, opts)
	data := func(seq uint64) []byte {
		b := make([]byte, 100)
		b[0] = byte(seq)
		return b
	}
	for seq := uint64(1); seq <= 5; seq++ {
		if _, err := w.Append(context.Background(), data(seq)); err != nil {
			t.Fatal(err)
		}
	}
	mustClose(t, w)
	if diff := cmp.Diff([]uint64{1, 3, 5}, segFiles(t, dir)); diff != "" {
		t.Fatalf("segments (-want +got):\n%s", diff)
	}
	first := segPath(dir, 1)
	b, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	rec2 := int64(len(b)) - (headerSize + 100) // entry 2 is the last record
	b[rec2+headerSize+50] ^= 1
	if err := os.WriteFile(first, b, 0o644); err != nil {
		t.Fatal(err)
	}

	for round := range 2 {
		w, rec := openT(t, dir, opts)
		want := Recovery{Pending: 4, PendingBytes: 4 * 100, TruncatedBytes: headerSize + 100, CorruptSegment: segName(1)}
		if diff := cmp.Diff(want, rec); diff != "" {
			t.Errorf("round %d: Recovery (-want +got):\n%s", round, diff)
		}
		var got []uint64
		for _, e := range replayAll(t, w) {
			if string(e.Data) != string(data(e.Seq)) {
				t.Errorf("entry %d has the wrong data", e.Seq)
			}
			got = append(got, e.Seq)
		}
		if diff := cmp.Diff([]uint64{1, 3, 4, 5}, got); diff != "" {
			t.Errorf("round %d: replayed (-want +got):\n%s", round, diff)
		}
		if fileSize(t, first) != int64(len(b)) {
			t.Errorf("round %d: the damaged segment was modified", round)
		}
		mustClose(t, w)
	}

	w, _ = openT(t, dir, opts)
	if seq, err := w.Append(context.Background(), data(6)); err != nil || seq != 6 {
		t.Errorf("Append = %d, %v; want 6", seq, err)
	}
	mustAck(t, w, 1)
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("damaged segment kept after its entries were acknowledged: %v", err)
	}
}

// TestEmptyLastSegment reopens a WAL whose newest segment holds no entry
// (a crash right after a rotation wrote its checkpoint, or before).
func TestEmptyLastSegment(t *testing.T) {
	for _, keep := range []int64{0, 5, -1} { // bytes of the new segment that survive; -1: all
		dir := t.TempDir()
		opts := Options{SegmentBytes: 300}
		w, _ := openT(t, dir, opts)
		appendSeqs(t, w, 1, 2)
		mustAck(t, w, 1)
		mustClose(t, w)
		// Write what a rotation to segment 3 writes.
		ck := appendCheckpointPayload(nil, 3, []seqRange{{2, 3}})
		rec := appendRecord(nil, kindCheckpoint, 0, payloadCRC(ck), ck)
		if keep >= 0 {
			rec = rec[:keep]
		}
		if err := os.WriteFile(segPath(dir, 3), rec, 0o644); err != nil {
			t.Fatal(err)
		}
		w, r := openT(t, dir, opts)
		if r.Pending != 1 {
			t.Errorf("keep %d: Pending = %d, want 1", keep, r.Pending)
		}
		if diff := cmp.Diff(entriesFor(2), replayAll(t, w)); diff != "" {
			t.Errorf("keep %d: replayed (-want +got):\n%s", keep, diff)
		}
		if seq, err := w.Append(context.Background(), payloadFor(3)); err != nil || seq != 3 {
			t.Errorf("keep %d: Append = %d, %v; want 3", keep, seq, err)
		}
		mustClose(t, w)
		w, r = openT(t, dir, opts)
		if r.Pending != 2 || r.TruncatedBytes != 0 {
			t.Errorf("keep %d: second Recovery = %+v, want 2 pending", keep, r)
		}
		mustClose(t, w)
	}
}
