package wal

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// entry is one replayed entry, comparable with go-cmp.
type entry struct {
	Seq  uint64
	Data string
}

// payloadFor is the deterministic payload of entry seq in most tests.
func payloadFor(seq uint64) []byte {
	return []byte(fmt.Sprintf("entry-%d-%s", seq, strings.Repeat("x", int(seq%7))))
}

func entriesFor(seqs ...uint64) []entry {
	var out []entry
	for _, s := range seqs {
		out = append(out, entry{s, string(payloadFor(s))})
	}
	return out
}

// payloadBytes is the total length of payloadFor(seq) over seqs.
func payloadBytes(seqs ...uint64) int64 {
	var n int64
	for _, s := range seqs {
		n += int64(len(payloadFor(s)))
	}
	return n
}

// openT opens a WAL in dir and closes it when the test ends.
func openT(t testing.TB, dir string, opts Options) (*WAL, Recovery) {
	t.Helper()
	opts.Dir = dir
	w, rec, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, rec
}

// appendSeqs appends payloadFor(seq) for the next n seqs, checking that the
// WAL assigns the expected numbers.
func appendSeqs(t testing.TB, w *WAL, from uint64, n int) {
	t.Helper()
	for i := range uint64(n) {
		seq, err := w.Append(context.Background(), payloadFor(from+i))
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		if seq != from+i {
			t.Fatalf("Append seq = %d, want %d", seq, from+i)
		}
	}
}

func replayAll(t testing.TB, w *WAL) []entry {
	t.Helper()
	var got []entry
	err := w.Replay(func(seq uint64, data []byte) error {
		got = append(got, entry{seq, string(data)})
		return nil
	})
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	return got
}

func mustClose(t testing.TB, w *WAL) {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func mustAck(t testing.TB, w *WAL, seqs ...uint64) {
	t.Helper()
	for _, s := range seqs {
		if err := w.Ack(s); err != nil {
			t.Fatalf("Ack(%d): %v", s, err)
		}
	}
}

// segFiles lists the segment files in dir by first seq.
func segFiles(t testing.TB, dir string) []uint64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, e := range ents {
		if s, ok := parseSegName(e.Name()); ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// fileRecords reads the records of one segment file directly.
func fileRecords(t testing.TB, path string) []record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	sc := newScanner(f, fi.Size(), false)
	var out []record
	for {
		r, ok := sc.next()
		if !ok {
			break
		}
		out = append(out, r)
	}
	if sc.err != nil {
		t.Fatalf("%s: bad record at %d: %v", path, sc.off, sc.err)
	}
	return out
}

// hasEntry reports whether seq is written in some segment file of dir.
func hasEntry(t testing.TB, dir string, seq uint64) bool {
	t.Helper()
	for _, first := range segFiles(t, dir) {
		for _, r := range fileRecords(t, segPath(dir, first)) {
			if r.kind == kindEntry && r.seq == seq {
				return true
			}
		}
	}
	return false
}

// copyDir copies the files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
