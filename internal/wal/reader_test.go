package wal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readAll reads every entry in [from, limit) with r.
func readAll(t *testing.T, r *Reader, from, limit uint64) []entry {
	t.Helper()
	var got []entry
	for {
		seq, data, ok, err := r.Next(from, limit)
		if err != nil {
			t.Fatalf("Next(%d, %d): %v", from, limit, err)
		}
		if !ok {
			return got
		}
		got = append(got, entry{seq, string(data)})
		from = seq + 1
	}
}

func seqRangeOf(lo, hi uint64) []uint64 {
	var s []uint64
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}

// TestReaderFollowsAppends reads entries back across segment boundaries,
// while appends and acknowledgements (which delete segments) go on, and
// never past the limit.
func TestReaderFollowsAppends(t *testing.T) {
	w, _ := openT(t, t.TempDir(), Options{SegmentBytes: 300})
	r := w.NewReader()
	defer r.Close()

	if got := readAll(t, r, 1, 100); got != nil {
		t.Fatalf("empty WAL read %v", got)
	}
	appendSeqs(t, w, 1, 40)
	if w.Stats().Segments < 4 {
		t.Fatalf("only %d segments; the test needs several", w.Stats().Segments)
	}
	if diff := cmp.Diff(entriesFor(seqRangeOf(1, 11)...), readAll(t, r, 1, 11)); diff != "" {
		t.Errorf("entries 1..10 (-want +got):\n%s", diff)
	}
	// Acknowledge what was read: older segments go away under the reader.
	mustAck(t, w, seqRangeOf(1, 11)...)
	appendSeqs(t, w, 41, 10)
	// A limit below the next entry returns nothing and does not move on.
	if got := readAll(t, r, 11, 11); got != nil {
		t.Errorf("limit 11 read %v", got)
	}
	if diff := cmp.Diff(entriesFor(seqRangeOf(11, 51)...), readAll(t, r, 11, 1000)); diff != "" {
		t.Errorf("entries 11..50 (-want +got):\n%s", diff)
	}
	// A later from skips ahead, to another segment.
	appendSeqs(t, w, 51, 30)
	if diff := cmp.Diff(entriesFor(seqRangeOf(70, 81)...), readAll(t, r, 70, 1000)); diff != "" {
		t.Errorf("entries 70..80 (-want +got):\n%s", diff)
	}
}

// TestReaderReportsCorruption flips a byte of an entry after it was written.
func TestReaderReportsCorruption(t *testing.T) {
	dir := t.TempDir()
	w, _ := openT(t, dir, Options{})
	appendSeqs(t, w, 1, 3)
	path := filepath.Join(dir, segName(1))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-2] ^= 0xff // inside the payload of entry 3
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := w.NewReader()
	defer r.Close()
	for from := uint64(1); ; {
		seq, _, ok, err := r.Next(from, 10)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || from != 3 {
				t.Fatalf("Next(%d): %v, want ErrCorrupt at 3", from, err)
			}
			return
		}
		if !ok {
			t.Fatal("the damaged entry was not reported")
		}
		from = seq + 1
	}
}

// TestRecoveryPendingBytes counts the payload bytes Replay will visit.
func TestRecoveryPendingBytes(t *testing.T) {
	dir := t.TempDir()
	w, _ := openT(t, dir, Options{SegmentBytes: 200})
	appendSeqs(t, w, 1, 20)
	mustAck(t, w, 2, 3, 5, 8, 13)
	mustClose(t, w)
	var want int64
	for seq := uint64(1); seq <= 20; seq++ {
		switch seq {
		case 2, 3, 5, 8, 13:
		default:
			want += int64(len(payloadFor(seq)))
		}
	}
	_, rec := openT(t, dir, Options{SegmentBytes: 200})
	if rec.Pending != 15 || rec.PendingBytes != want {
		t.Errorf("recovery %+v, want 15 entries and %d bytes", rec, want)
	}
}
