package objectstore

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// lineIter reads data as a plain lines object.
func lineIter(data []byte) *recordIter {
	raw := &countingReader{r: bytes.NewReader(data)}
	return &recordIter{body: io.NopCloser(nil), raw: raw, size: int64(len(data)), plain: true,
		lines: bufio.NewReaderSize(raw, 16)}
}

// readLinesAt returns the records of data from byte offset off, and the
// offset after each.
func readLinesAt(t *testing.T, data []byte, off int64) (recs []string, ends []int64) {
	t.Helper()
	it := lineIter(data[off:])
	for range len(data) + 1 {
		rec, err := it.next()
		if errors.Is(err, io.EOF) {
			return recs, ends
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(rec, '\n') >= 0 {
			t.Fatalf("record %q holds a newline", rec)
		}
		off += it.last
		recs, ends = append(recs, string(rec)), append(ends, off)
	}
	t.Fatal("more records than bytes")
	return nil, nil
}

// FuzzLines: the byte offsets the input keeps for resuming add up to the
// object, and resuming at the offset after any record yields exactly the
// records after it.
func FuzzLines(f *testing.F) {
	for _, s := range []string{"", "a", "a\n", "a\r\nb", "\n\n", "x\r", "long line without end" + string(make([]byte, 40))} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 512 {
			return // the check is quadratic in the records
		}
		recs, ends := readLinesAt(t, data, 0)
		if len(ends) > 0 && ends[len(ends)-1] != int64(len(data)) {
			t.Fatalf("offsets end at %d of %d bytes", ends[len(ends)-1], len(data))
		}
		if len(recs) == 0 && len(data) > 0 {
			t.Fatalf("%q gave no records", data)
		}
		for i, end := range ends {
			rest, _ := readLinesAt(t, data, end)
			if len(rest) != len(recs)-i-1 {
				t.Fatalf("resuming after record %d gave %d records, want %d", i, len(rest), len(recs)-i-1)
			}
			for j := range rest {
				if rest[j] != recs[i+1+j] {
					t.Fatalf("resuming after record %d: %q, want %q", i, rest[j], recs[i+1+j])
				}
			}
		}
	})
}

// flakyBody returns its data, then an error once, then io.EOF, like a
// connection cut and then closed.
type flakyBody struct {
	data   []byte
	failed bool
}

func (f *flakyBody) Read(p []byte) (int, error) {
	if len(f.data) > 0 {
		n := copy(p, f.data)
		f.data = f.data[n:]
		return n, nil
	}
	if !f.failed {
		f.failed = true
		return 0, errors.New("connection reset")
	}
	return 0, io.EOF
}

// TestLineErrorSticks: after a failed read the iterator keeps failing,
// so a cut download never looks like the end of the object.
func TestLineErrorSticks(t *testing.T) {
	raw := &countingReader{r: &flakyBody{data: []byte("a\npart")}}
	it := &recordIter{body: io.NopCloser(nil), raw: raw, size: 100, plain: true, lines: bufio.NewReader(raw)}
	if rec, err := it.next(); err != nil || string(rec) != "a" {
		t.Fatalf("next = %q, %v", rec, err)
	}
	for range 3 {
		if _, err := it.next(); err == nil || errors.Is(err, io.EOF) {
			t.Fatalf("next = %v, want the read error", err)
		}
	}
}
