package wal

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var allModes = []SyncMode{SyncPerEntry, SyncGroupCommit, SyncPeriodic}

func TestRoundTrip(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			w, rec := openT(t, dir, Options{Sync: mode})
			if diff := cmp.Diff(Recovery{}, rec); diff != "" {
				t.Errorf("fresh Recovery (-want +got):\n%s", diff)
			}
			data := [][]byte{[]byte("one"), {}, []byte("three"), make([]byte, 70000)}
			var want []entry
			for i, d := range data {
				seq, err := w.Append(context.Background(), d)
				if err != nil || seq != uint64(i+1) {
					t.Fatalf("Append = %d, %v; want %d, nil", seq, err, i+1)
				}
				want = append(want, entry{seq, string(d)})
			}
			if got := replayAll(t, w); len(got) != 0 {
				t.Errorf("Replay of a fresh WAL visited %d entries appended after Open", len(got))
			}
			mustClose(t, w)

			w2, rec := openT(t, dir, Options{Sync: mode})
			if rec.Pending != len(data) || rec.TruncatedBytes != 0 || rec.CorruptSegment != "" {
				t.Errorf("Recovery = %+v, want %d pending and nothing dropped", rec, len(data))
			}
			if diff := cmp.Diff(want, replayAll(t, w2)); diff != "" {
				t.Errorf("replayed (-want +got):\n%s", diff)
			}
			seq, err := w2.Append(context.Background(), []byte("five"))
			if err != nil || seq != 5 {
				t.Errorf("Append after reopen = %d, %v; want 5, nil", seq, err)
			}
		})
	}
}

func TestReplayReturnsUnackedInOrder(t *testing.T) {
	tests := []struct {
		name   string
		acks   []uint64 // acknowledged before the first Close
		more   []uint64 // acknowledged after the first reopen
		replay []uint64 // replayed after the second reopen
	}{
		{"none acked", nil, nil, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"out of order", []uint64{7, 3, 9, 1}, nil, []uint64{2, 4, 5, 6, 8, 10}},
		{"duplicates", []uint64{3, 3, 10, 10}, []uint64{3, 2}, []uint64{1, 4, 5, 6, 7, 8, 9}},
		{"acked across restarts", []uint64{10, 8, 6}, []uint64{1, 5, 9}, []uint64{2, 3, 4, 7}},
		{"all", []uint64{5, 4, 3, 2, 1, 6, 7, 8, 9, 10}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w, _ := openT(t, dir, Options{})
			appendSeqs(t, w, 1, 10)
			mustAck(t, w, tt.acks...)
			mustClose(t, w)

			w, _ = openT(t, dir, Options{})
			mustAck(t, w, tt.more...)
			mustClose(t, w)

			w, rec := openT(t, dir, Options{})
			if rec.Pending != len(tt.replay) {
				t.Errorf("Recovery.Pending = %d, want %d", rec.Pending, len(tt.replay))
			}
			if diff := cmp.Diff(entriesFor(tt.replay...), replayAll(t, w)); diff != "" {
				t.Errorf("replayed (-want +got):\n%s", diff)
			}
			if st := w.Stats(); st.Pending != uint64(len(tt.replay)) {
				t.Errorf("Stats.Pending = %d, want %d", st.Pending, len(tt.replay))
			}
		})
	}
}

func TestAckErrors(t *testing.T) {
	w, _ := openT(t, t.TempDir(), Options{})
	appendSeqs(t, w, 1, 3)
	for _, seq := range []uint64{0, 4, 1000} {
		if err := w.Ack(seq); !errors.Is(err, ErrUnknownSeq) {
			t.Errorf("Ack(%d) = %v, want ErrUnknownSeq", seq, err)
		}
	}
	mustAck(t, w, 2, 2)
	if st := w.Stats(); st.Acked != 1 || st.Pending != 2 || st.Appended != 3 {
		t.Errorf("Stats = %+v, want 3 appended, 1 acked, 2 pending", st)
	}
}

// TestAckRecordedInDeletedSegment acknowledges entry 1 while segment 3 is
// active, so its ack record lands in segment 3; segment 3 is then deleted.
// The checkpoint at the head of segment 5 must still carry the ack.
func TestAckRecordedInDeletedSegment(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) { testAckRecordedInDeletedSegment(t, mode) })
	}
}

func testAckRecordedInDeletedSegment(t *testing.T, mode SyncMode) {
	dir := t.TempDir()
	// Two 117-byte entries (100-byte payloads) fit in a 300-byte segment.
	opts := Options{SegmentBytes: 300, Sync: mode}
	w, _ := openT(t, dir, opts)
	p := make([]byte, 100)
	for i := range 3 {
		if _, err := w.Append(context.Background(), p); err != nil {
			t.Fatal(i, err)
		}
	}
	if diff := cmp.Diff([]uint64{1, 3}, segFiles(t, dir)); diff != "" {
		t.Fatalf("segments after 3 entries (-want +got):\n%s", diff)
	}
	mustAck(t, w, 1)
	for range 2 {
		if _, err := w.Append(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]uint64{1, 3, 5}, segFiles(t, dir)); diff != "" {
		t.Fatalf("segments after 5 entries (-want +got):\n%s", diff)
	}
	mustAck(t, w, 4, 3)
	if diff := cmp.Diff([]uint64{1, 5}, segFiles(t, dir)); diff != "" {
		t.Errorf("segments after acking 3 and 4 (-want +got):\n%s", diff)
	}
	mustClose(t, w)

	w, rec := openT(t, dir, opts)
	var got []uint64
	for _, e := range replayAll(t, w) {
		got = append(got, e.Seq)
	}
	if diff := cmp.Diff([]uint64{2, 5}, got); diff != "" {
		t.Errorf("replayed seqs (-want +got):\n%s", diff)
	}
	if rec.Pending != 2 {
		t.Errorf("Recovery.Pending = %d, want 2", rec.Pending)
	}
	mustAck(t, w, 5, 2)
	if diff := cmp.Diff([]uint64{5}, segFiles(t, dir)); diff != "" {
		t.Errorf("segments after acking everything (-want +got):\n%s", diff)
	}
}

// TestSegmentDeletion acks entries in random order and checks after every
// ack that exactly the segments holding an unacknowledged entry, plus the
// active one, remain on disk.
func TestSegmentDeletion(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) { testSegmentDeletion(t, mode) })
	}
}

func testSegmentDeletion(t *testing.T, mode SyncMode) {
	dir := t.TempDir()
	w, _ := openT(t, dir, Options{SegmentBytes: 512, Sync: mode})
	const n = 120
	appendSeqs(t, w, 1, n)
	firsts := segFiles(t, dir)
	if len(firsts) < 5 {
		t.Fatalf("want at least 5 segments, got %v", firsts)
	}
	if st := w.Stats(); st.Segments != len(firsts) {
		t.Errorf("Stats.Segments = %d, want %d", st.Segments, len(firsts))
	}
	segOf := func(seq uint64) uint64 {
		i, found := slices.BinarySearch(firsts, seq)
		if !found {
			i--
		}
		return firsts[i]
	}
	acked := map[uint64]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, i := range rng.Perm(n) {
		seq := uint64(i + 1)
		mustAck(t, w, seq)
		acked[seq] = true
		keep := map[uint64]bool{firsts[len(firsts)-1]: true}
		for s := uint64(1); s <= n; s++ {
			if !acked[s] {
				keep[segOf(s)] = true
			}
		}
		var want []uint64
		for _, f := range firsts {
			if keep[f] {
				want = append(want, f)
			}
		}
		if diff := cmp.Diff(want, segFiles(t, dir)); diff != "" {
			t.Fatalf("after acking %d: segments (-want +got):\n%s", seq, diff)
		}
	}
	var size int64
	for _, f := range segFiles(t, dir) {
		size += fileSize(t, segPath(dir, f))
	}
	if st := w.Stats(); st.Segments != 1 || st.Bytes != size || st.Pending != 0 {
		t.Errorf("Stats = %+v, want 1 segment of %d bytes and nothing pending", st, size)
	}
}

func TestStatsBytesMatchDisk(t *testing.T) {
	dir := t.TempDir()
	w, _ := openT(t, dir, Options{SegmentBytes: 1000})
	appendSeqs(t, w, 1, 40)
	var size int64
	files := segFiles(t, dir)
	for _, f := range files {
		size += fileSize(t, segPath(dir, f))
	}
	st := w.Stats()
	if st.Bytes != size || st.Segments != len(files) || st.Appended != 40 || st.Pending != 40 {
		t.Errorf("Stats = %+v; disk has %d segments, %d bytes; want 40 appended and pending", st, len(files), size)
	}
}

func TestConcurrentAppendAsync(t *testing.T) {
	dir := t.TempDir()
	w, _ := openT(t, dir, Options{SegmentBytes: 4096})
	const writers, per = 8, 250
	var (
		mu    sync.Mutex
		data  = map[uint64]string{}
		acked = map[uint64]bool{}
		wg    sync.WaitGroup
	)
	for g := range writers {
		wg.Go(func() {
			type op struct {
				seq uint64
				ch  <-chan error
			}
			var window []op
			wait := func(o op) {
				if err := <-o.ch; err != nil {
					t.Errorf("durable(%d): %v", o.seq, err)
					return
				}
				if o.seq%3 == 0 {
					if err := w.Ack(o.seq); err != nil {
						t.Errorf("Ack(%d): %v", o.seq, err)
					}
					mu.Lock()
					acked[o.seq] = true
					mu.Unlock()
				}
			}
			for i := range per {
				d := []byte(string(rune('a'+g)) + "-" + string(payloadFor(uint64(i))))
				seq, ch := w.AppendAsync(d)
				mu.Lock()
				if _, dup := data[seq]; dup {
					t.Errorf("seq %d assigned twice", seq)
				}
				data[seq] = string(d)
				mu.Unlock()
				window = append(window, op{seq, ch})
				if len(window) == 16 {
					wait(window[0])
					window = window[1:]
				}
			}
			for _, o := range window {
				wait(o)
			}
		})
	}
	wg.Wait()
	mustClose(t, w)

	w, rec := openT(t, dir, Options{SegmentBytes: 4096})
	var want []entry
	for seq := uint64(1); seq <= writers*per; seq++ {
		d, ok := data[seq]
		if !ok {
			t.Fatalf("seq %d never assigned", seq)
		}
		if !acked[seq] {
			want = append(want, entry{seq, d})
		}
	}
	if rec.Pending != len(want) {
		t.Errorf("Recovery.Pending = %d, want %d", rec.Pending, len(want))
	}
	if diff := cmp.Diff(want, replayAll(t, w)); diff != "" {
		t.Errorf("replayed (-want +got):\n%s", diff)
	}
}

func TestCloseSemantics(t *testing.T) {
	dir := t.TempDir()
	w, _ := openT(t, dir, Options{})
	var chans []<-chan error
	for i := range uint64(50) {
		seq, ch := w.AppendAsync(payloadFor(i + 1))
		if seq != i+1 {
			t.Fatalf("seq = %d, want %d", seq, i+1)
		}
		chans = append(chans, ch)
	}
	mustClose(t, w)
	for i, ch := range chans {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("entry %d appended before Close: %v", i+1, err)
			}
		default:
			t.Errorf("entry %d appended before Close not reported when Close returned", i+1)
		}
	}
	if _, err := w.Append(context.Background(), []byte("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
	if _, ch := w.AppendAsync([]byte("late")); !errors.Is(<-ch, ErrClosed) {
		t.Error("AppendAsync after Close did not yield ErrClosed")
	}
	if err := w.Ack(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Ack after Close = %v, want ErrClosed", err)
	}
	if err := w.Replay(func(uint64, []byte) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Replay after Close = %v, want ErrClosed", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	w, rec := openT(t, dir, Options{})
	if rec.Pending != 50 {
		t.Errorf("after reopen Pending = %d, want 50", rec.Pending)
	}
	if got := replayAll(t, w); len(got) != 50 {
		t.Errorf("replayed %d entries, want 50", len(got))
	}
}

func TestReplayStopsAtError(t *testing.T) {
	dir := t.TempDir()
	w, _ := openT(t, dir, Options{})
	appendSeqs(t, w, 1, 5)
	mustClose(t, w)
	w, _ = openT(t, dir, Options{})
	stop := errors.New("stop")
	var seen []uint64
	err := w.Replay(func(seq uint64, _ []byte) error {
		seen = append(seen, seq)
		if seq == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || !slices.Equal(seen, []uint64{1, 2, 3}) {
		t.Errorf("Replay = %v after %v, want stop after [1 2 3]", err, seen)
	}
}

// TestAckBeforeDurable acknowledges an entry the committer has not written
// yet; the ack must still apply once it is.
func TestAckBeforeDurable(t *testing.T) {
	dir := t.TempDir()
	w, _ := openT(t, dir, Options{})
	release := make(chan struct{})
	started := make(chan struct{})
	var once sync.Once
	w.hookCommit = func() { once.Do(func() { close(started); <-release }) }
	_, first := w.AppendAsync(payloadFor(1))
	<-started
	seq, second := w.AppendAsync(payloadFor(2))
	mustAck(t, w, seq)
	close(release)
	for _, ch := range []<-chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if st := w.Stats(); st.Pending != 1 || st.Acked != 1 {
		t.Errorf("Stats = %+v, want 1 pending, 1 acked", st)
	}
	mustClose(t, w)
	w, _ = openT(t, dir, Options{})
	if diff := cmp.Diff(entriesFor(1), replayAll(t, w)); diff != "" {
		t.Errorf("replayed (-want +got):\n%s", diff)
	}
}

func TestWriteFailureIsSticky(t *testing.T) {
	dir := t.TempDir()
	w, _ := openT(t, dir, Options{})
	appendSeqs(t, w, 1, 2)
	// Break the active segment's descriptor under the committer.
	if err := w.f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(context.Background(), []byte("x")); err == nil || errors.Is(err, ErrClosed) {
		t.Fatalf("Append on a broken file = %v, want a write error", err)
	}
	if _, err := w.Append(context.Background(), []byte("y")); err == nil {
		t.Error("Append after a write failure succeeded")
	}
	if err := w.Close(); err == nil {
		t.Error("Close after a write failure = nil, want the failure")
	}
	w, rec := openT(t, dir, Options{})
	if rec.Pending != 2 {
		t.Errorf("after reopen Pending = %d, want the 2 durable entries", rec.Pending)
	}
	if diff := cmp.Diff(entriesFor(1, 2), replayAll(t, w)); diff != "" {
		t.Errorf("replayed (-want +got):\n%s", diff)
	}
}

func TestOpenErrors(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, []byte("not a dir"), 0o644); err != nil {
		t.Fatal(err)
	}
	segDir := filepath.Join(base, "segdir")
	if err := os.MkdirAll(filepath.Join(segDir, segName(1)), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts Options
		want error
	}{
		{"dir is a file", Options{Dir: file}, ErrOpen},
		{"dir below a file", Options{Dir: filepath.Join(file, "wal")}, ErrOpen},
		{"segment is a directory", Options{Dir: segDir}, ErrOpen},
		{"empty dir", Options{}, ErrInvalidOptions},
		{"unknown sync mode", Options{Dir: base, Sync: "sometimes"}, ErrInvalidOptions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, _, err := Open(tt.opts)
			if !errors.Is(err, tt.want) {
				t.Errorf("Open = %v, want %v", err, tt.want)
			}
			if w != nil {
				t.Error("Open returned a WAL with an error")
				_ = w.Close()
			}
		})
	}
}

func TestAppendTooLarge(t *testing.T) {
	w, _ := openT(t, t.TempDir(), Options{})
	_, err := w.Append(context.Background(), make([]byte, MaxEntryBytes+1))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("Append of %d bytes = %v, want ErrTooLarge", MaxEntryBytes+1, err)
	}
}

func TestAppendContextCanceled(t *testing.T) {
	w, _ := openT(t, t.TempDir(), Options{})
	release := make(chan struct{})
	w.hookCommit = func() { <-release }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	seq, err := w.Append(ctx, []byte("x"))
	if !errors.Is(err, context.Canceled) || seq != 1 {
		t.Errorf("Append with a canceled ctx = %d, %v; want 1, context.Canceled", seq, err)
	}
	close(release)
}
