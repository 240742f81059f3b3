package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/blob"
)

const waitBound = 30 * time.Second

// fileBucket opens a file:// bucket in dir.
func fileBucket(t testing.TB, dir string) *blob.Bucket {
	t.Helper()
	b, err := OpenURL(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func open(t testing.TB, dir string, o Options) (*WAL, Recovery) {
	t.Helper()
	o.Bucket = fileBucket(t, dir)
	if o.Prefix == "" {
		o.Prefix = "wal/n1/s1"
	}
	w, rec, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return w, rec
}

// keys lists the bucket's keys under wal/n1/s1/.
func keys(t *testing.T, dir string) []string {
	t.Helper()
	out, err := tryKeys(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryKeys lists the keys; it fails when a file is deleted while listed.
func tryKeys(t *testing.T, dir string) ([]string, error) {
	b := fileBucket(t, dir)
	defer b.Close()
	var out []string
	it := b.List(&blob.ListOptions{Prefix: "wal/n1/s1/"})
	for {
		o, err := it.Next(context.Background())
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, strings.TrimPrefix(o.Key, "wal/n1/s1/"))
	}
}

func replayAll(t *testing.T, w *WAL) map[uint64]string {
	t.Helper()
	got := map[uint64]string{}
	var last uint64
	err := w.Replay(context.Background(), func(seq uint64, data []byte) error {
		if seq <= last {
			t.Errorf("seq %d replayed after %d", seq, last)
		}
		last = seq
		got[seq] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func appendN(t *testing.T, w *WAL, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := w.Append(context.Background(), []byte(fmt.Sprintf("e%d", i))); err != nil {
			t.Fatal(err)
		}
	}
}

func ready(ch <-chan error) bool {
	select {
	case err := <-ch:
		panic(fmt.Sprintf("channel read while checking readiness: %v", err))
	default:
		return false
	}
}

// TestGroupCommit blocks the first segment PUT, makes 99 concurrent appends
// meanwhile, and checks: no append is reported before the PUT holding it
// succeeded, and the 99 go into one segment with one PUT (then into
// several when MaxEntries is smaller).
func TestGroupCommit(t *testing.T) {
	for _, tc := range []struct {
		maxEntries int
		wantKeys   []string
	}{
		{1000, []string{"seg/00000000000000000001-0000000001", "seg/00000000000000000002-0000000099"}},
		{40, []string{
			"seg/00000000000000000001-0000000001", "seg/00000000000000000002-0000000040",
			"seg/00000000000000000042-0000000040", "seg/00000000000000000082-0000000019",
		}},
	} {
		t.Run(fmt.Sprint(tc.maxEntries), func(t *testing.T) {
			dir := t.TempDir()
			w, _ := open(t, dir, Options{MaxEntries: tc.maxEntries, Workers: 1})
			entered, release := make(chan string, 10), make(chan struct{})
			w.hookPut = func(key string) error {
				entered <- key
				<-release
				return nil
			}
			_, first := w.AppendAsync([]byte("first"))
			<-entered // the first PUT is under way and holds the only worker
			var wg sync.WaitGroup
			chans := make([]<-chan error, 99)
			for i := range chans {
				wg.Go(func() { _, chans[i] = w.AppendAsync(fmt.Appendf(nil, "e%d", i)) })
			}
			wg.Wait()
			if ready(first) {
				t.Fatal("unreachable")
			}
			for _, ch := range chans {
				ready(ch)
			}
			w.mu.Lock()
			queued := len(w.queue)
			w.mu.Unlock()
			if queued != 99 {
				t.Fatalf("%d appends queued behind the PUT, want 99", queued)
			}
			close(release)
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			for _, ch := range chans {
				if err := <-ch; err != nil {
					t.Fatal(err)
				}
			}
			if st := w.Stats(); st.Puts != uint64(len(tc.wantKeys)) || st.Appended != 100 || st.Pending != 100 {
				t.Errorf("stats %+v, want %d PUTs for 100 appends", st, len(tc.wantKeys))
			}
			if diff := cmp.Diff(tc.wantKeys, keys(t, dir)); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAppendFailsWithItsPut makes one segment PUT fail: its append gets
// the error, later appends succeed, and once the others are acknowledged
// the cursor passes the gap and the next Open replays nothing.
func TestAppendFailsWithItsPut(t *testing.T) {
	dir := t.TempDir()
	w, _ := open(t, dir, Options{})
	boom := errors.New("503 Slow Down")
	w.hookPut = func(key string) error {
		if strings.Contains(key, "00000000000000000002-") {
			return boom
		}
		return nil
	}
	var seqs []uint64
	for i := range 3 {
		seq, err := w.Append(context.Background(), fmt.Appendf(nil, "e%d", i))
		if i == 1 {
			if !errors.Is(err, boom) {
				t.Fatalf("append 2: err %v, want the PUT's", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	if diff := cmp.Diff([]uint64{1, 3}, seqs); diff != "" {
		t.Fatalf("seqs (-want +got):\n%s", diff)
	}
	st := w.Stats()
	if st.Failed != 1 || st.Puts != 2 || st.Pending != 2 {
		t.Fatalf("stats %+v", st)
	}
	// Read skips the gap.
	seq, data, ok, err := w.Read(context.Background(), 2, 10)
	if err != nil || !ok || seq != 3 || string(data) != "e2" {
		t.Fatalf("Read(2, 10) = %d %q %v %v, want 3 e2", seq, data, ok, err)
	}
	for _, s := range seqs {
		if err := w.Ack(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cursor"}, keys(t, dir)); diff != "" {
		t.Errorf("keys after Close (-want +got):\n%s", diff)
	}
	w, rec := open(t, dir, Options{})
	defer w.Close()
	if rec.Cursor != 4 || rec.Pending != 0 {
		t.Fatalf("recovery %+v, want cursor 4 and nothing pending", rec)
	}
	if seq, _ := w.Append(context.Background(), []byte("x")); seq != 4 {
		t.Fatalf("next seq %d, want 4", seq)
	}
}

// TestRecovery acknowledges some entries, closes, reopens: the entries at
// or past the cursor are replayed (an entry acknowledged past a gap of
// unacknowledged ones is replayed again: at-least-once), segments wholly
// below the cursor are gone, and numbering goes on.
func TestRecovery(t *testing.T) {
	dir := t.TempDir()
	w, rec := open(t, dir, Options{Compression: Compression{Codec: CodecZstd}})
	if diff := cmp.Diff(Recovery{Cursor: 1}, rec); diff != "" {
		t.Fatalf("fresh recovery (-want +got):\n%s", diff)
	}
	appendN(t, w, 1, 10) // one segment each
	for _, s := range []uint64{1, 2, 3, 4, 7} {
		if err := w.Ack(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Ack(11); !errors.Is(err, ErrUnknownSeq) {
		t.Fatalf("Ack(11) = %v, want ErrUnknownSeq", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"cursor"}
	for i := 5; i <= 10; i++ {
		want = append(want, fmt.Sprintf("seg/%020d-0000000001", i))
	}
	if diff := cmp.Diff(want, keys(t, dir)); diff != "" {
		t.Fatalf("keys (-want +got):\n%s", diff)
	}
	w, rec = open(t, dir, Options{})
	if diff := cmp.Diff(Recovery{Pending: 6, PendingBytes: 5*2 + 3, Cursor: 5, Segments: 6}, rec); diff != "" {
		t.Fatalf("recovery (-want +got):\n%s", diff)
	}
	got := replayAll(t, w)
	if diff := cmp.Diff(map[uint64]string{5: "e5", 6: "e6", 7: "e7", 8: "e8", 9: "e9", 10: "e10"}, got); diff != "" {
		t.Fatalf("replayed (-want +got):\n%s", diff)
	}
	if seq, err := w.Append(context.Background(), []byte("e11")); err != nil || seq != 11 {
		t.Fatalf("append after recovery: %d %v, want 11", seq, err)
	}
	for s := uint64(5); s <= 11; s++ {
		if err := w.Ack(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cursor"}, keys(t, dir)); diff != "" {
		t.Fatalf("keys after all acknowledged (-want +got):\n%s", diff)
	}
}

// TestRecoverySkipsCorruptSegment damages a middle segment: Open counts and
// names it and replays the others; it is deleted once the cursor passes.
func TestRecoverySkipsCorruptSegment(t *testing.T) {
	dir := t.TempDir()
	w, _ := open(t, dir, Options{})
	appendN(t, w, 1, 3)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := fileBucket(t, dir)
	key := "wal/n1/s1/seg/00000000000000000002-0000000001"
	data, err := b.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteAll(context.Background(), key, data[:len(data)-1], nil); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	w, rec := open(t, dir, Options{})
	want := Recovery{Pending: 2, PendingBytes: 4, Cursor: 1, Segments: 2, CorruptSegments: 1, CorruptKeys: []string{key}}
	if diff := cmp.Diff(want, rec); diff != "" {
		t.Fatalf("recovery (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[uint64]string{1: "e1", 3: "e3"}, replayAll(t, w)); diff != "" {
		t.Fatalf("replayed (-want +got):\n%s", diff)
	}
	for _, s := range []uint64{1, 3} {
		if err := w.Ack(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cursor"}, keys(t, dir)); diff != "" {
		t.Fatalf("keys (-want +got):\n%s", diff)
	}
}

// TestCursorAfterMaxEntries checks the cursor is written after
// CursorMaxEntries acknowledgements, with the interval far away, and the
// segments below it deleted while the WAL runs.
func TestCursorAfterMaxEntries(t *testing.T) {
	dir := t.TempDir()
	w, _ := open(t, dir, Options{CursorMaxEntries: 3, CursorInterval: time.Hour})
	defer w.Close()
	appendN(t, w, 1, 4)
	for s := uint64(1); s <= 3; s++ {
		if err := w.Ack(s); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"cursor", "seg/00000000000000000004-0000000001"}
	deadline := time.Now().Add(waitBound)
	for {
		got, err := tryKeys(t, dir) // the WAL deletes while we list
		if err == nil && slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys %v (%v), want %v", got, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := w.Stats(); st.Cursor != 4 || st.Segments != 1 {
		t.Fatalf("stats %+v, want cursor 4 and one segment", st)
	}
}

// TestReadBack reads entries back from their segments, across segments.
func TestReadBack(t *testing.T) {
	dir := t.TempDir()
	w, _ := open(t, dir, Options{MaxEntries: 2})
	defer w.Close()
	var chans []<-chan error
	for i := 1; i <= 5; i++ {
		_, ch := w.AppendAsync(fmt.Appendf(nil, "e%d", i))
		chans = append(chans, ch)
	}
	for _, ch := range chans {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for from := uint64(1); ; {
		seq, data, ok, err := w.Read(context.Background(), from, 100)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, fmt.Sprintf("%d=%s", seq, data))
		from = seq + 1
	}
	if diff := cmp.Diff([]string{"1=e1", "2=e2", "3=e3", "4=e4", "5=e5"}, got); diff != "" {
		t.Fatalf("read back (-want +got):\n%s", diff)
	}
	if _, _, ok, _ := w.Read(context.Background(), 2, 2); ok {
		t.Fatal("Read(2, 2) found an entry")
	}
}

// TestClosed checks operations after Close.
func TestClosed(t *testing.T) {
	w, _ := open(t, t.TempDir(), Options{})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(context.Background(), []byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append: %v", err)
	}
	if err := w.Ack(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Ack: %v", err)
	}
	if err := w.Replay(context.Background(), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Replay: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, _, err := Open(context.Background(), Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Open without a bucket: %v", err)
	}
}

// TestCursorAfterInterval checks the cursor is written CursorInterval
// after it moved, with CursorMaxEntries far away.
func TestCursorAfterInterval(t *testing.T) {
	dir := t.TempDir()
	w, _ := open(t, dir, Options{CursorMaxEntries: 1000, CursorInterval: 10 * time.Millisecond})
	defer w.Close()
	appendN(t, w, 1, 2)
	if err := w.Ack(1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitBound)
	for w.Stats().Cursor != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want the cursor at 2", w.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	b := fileBucket(t, dir)
	defer b.Close()
	data, err := b.ReadAll(context.Background(), "wal/n1/s1/cursor")
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := decodeCursor(data); !ok || c != 2 {
		t.Fatalf("cursor object %x decodes to %d %v, want 2", data, c, ok)
	}
}
