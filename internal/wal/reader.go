package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// readAhead is how much of a segment file a Reader reads at once.
const readAhead = 256 << 10

// Reader reads entries back from the segment files, in sequence order. It is
// for a consumer that fell behind the appends and does not hold the entries
// in memory: whatever the backlog, the Reader holds one read-ahead buffer.
// It sees only entries whose append was reported durable (their bytes are in
// the files). A Reader is used by one goroutine; it does not stop segment
// files from being deleted once their entries are acknowledged.
type Reader struct {
	w      *WAL
	f      *os.File // the segment being read, or nil
	first  uint64   // its first seq
	off    int64    // file offset of the next record
	buf    []byte   // bytes of the file from bufOff on
	bufOff int64
}

// NewReader returns a Reader positioned before the oldest segment.
func (w *WAL) NewReader() *Reader { return &Reader{w: w} }

// Next returns the first entry whose seq is at least from and below limit,
// reading on from where the previous call stopped (or from the segment that
// holds from, when that lies ahead). ok is false when there is no such entry
// in the files yet; the Reader then stays where it was. Entries are returned
// whether or not they were acknowledged. from must not go back past an
// entry already passed. data belongs to the caller. A record that fails its
// checksum is reported as ErrCorrupt.
func (r *Reader) Next(from, limit uint64) (seq uint64, data []byte, ok bool, err error) {
	for gone := 0; ; {
		size, end, last, err := r.locate(from)
		if errors.Is(err, os.ErrNotExist) && gone < 3 {
			gone++ // acknowledged and deleted since locate looked
			continue
		}
		if err != nil || r.f == nil {
			return 0, nil, false, err
		}
		for r.off < size {
			rec, end, err := r.record(size)
			if err != nil {
				return 0, nil, false, err
			}
			if rec.kind != kindEntry || rec.seq < from {
				r.off = end
				continue
			}
			if rec.seq >= limit {
				return 0, nil, false, nil
			}
			r.off = end
			return rec.seq, append([]byte(nil), rec.payload...), true, nil
		}
		if last {
			return 0, nil, false, nil
		}
		// The segment is complete and a later one exists: move on.
		r.closeFile()
		from = max(from, end)
	}
}

// locate opens the segment to read next, when it is not open yet or from
// lies in a later one, and returns the segment's size and whether it is the
// last (active) one, and the seq after its last entry. With no segment at
// or after from, r.f stays nil.
func (r *Reader) locate(from uint64) (size int64, end uint64, last bool, err error) {
	w := r.w
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return 0, 0, false, ErrClosed
	}
	segs := w.segs
	// The segment holding from, or the first one after it.
	i := max(sort.Search(len(segs), func(i int) bool { return segs[i].first > from })-1, 0)
	cur := -1
	if r.f != nil {
		cur = sort.Search(len(segs), func(i int) bool { return segs[i].first >= r.first })
		if cur == len(segs) || segs[cur].first != r.first || segs[i].first > r.first {
			cur = -1 // deleted, or from lies ahead of it
		}
	}
	if cur < 0 {
		for i < len(segs) && segs[i].first+segs[i].n <= from && i < len(segs)-1 {
			i++ // every entry of segs[i] is below from
		}
		cur = i
	}
	var first uint64
	if cur < len(segs) {
		first, size, last = segs[cur].first, segs[cur].size, cur == len(segs)-1
		end = first + segs[cur].n
	}
	w.mu.Unlock()
	if cur >= len(segs) {
		r.closeFile()
		return 0, 0, false, nil
	}
	if r.f == nil || r.first != first {
		r.closeFile()
		f, err := os.Open(segPath(w.opts.Dir, first))
		if err != nil {
			return 0, 0, false, fmt.Errorf("wal: read: %w", err)
		}
		r.f, r.first, r.off = f, first, 0
	}
	return size, end, last, nil
}

// record decodes the record at r.off, which must end by size, and returns it
// with its end offset.
func (r *Reader) record(size int64) (record, int64, error) {
	h, err := r.bytes(r.off, headerSize, size)
	if err != nil {
		return record{}, 0, err
	}
	var hdr [headerSize]byte
	copy(hdr[:], h)
	n := int64(binary.LittleEndian.Uint32(hdr[0:4]))
	if n > MaxEntryBytes || r.off+headerSize+n > size {
		return record{}, 0, r.corrupt()
	}
	p, err := r.bytes(r.off+headerSize, n, size)
	if err != nil {
		return record{}, 0, err
	}
	if finishCRC(payloadCRC(p), &hdr) != binary.LittleEndian.Uint32(hdr[4:8]) {
		return record{}, 0, r.corrupt()
	}
	rec := record{kind: hdr[16], seq: binary.LittleEndian.Uint64(hdr[8:16]), payload: p}
	return rec, r.off + headerSize + n, nil
}

// bytes returns n bytes of the file at off, through the read-ahead buffer.
func (r *Reader) bytes(off, n, size int64) ([]byte, error) {
	if off+n > size {
		return nil, r.corrupt()
	}
	if off >= r.bufOff && off+n <= r.bufOff+int64(len(r.buf)) {
		return r.buf[off-r.bufOff : off-r.bufOff+n], nil
	}
	want := min(max(n, readAhead), size-off)
	if int64(cap(r.buf)) < want || cap(r.buf) > 4*readAhead && want <= readAhead {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	got, err := r.f.ReadAt(r.buf, off)
	if int64(got) < n {
		r.buf, r.bufOff = r.buf[:0], 0
		if err == nil || errors.Is(err, io.EOF) {
			return nil, r.corrupt()
		}
		return nil, fmt.Errorf("wal: read %s: %w", segName(r.first), err)
	}
	r.buf, r.bufOff = r.buf[:got], off
	return r.buf[:n], nil
}

func (r *Reader) corrupt() error {
	return fmt.Errorf("%w: %s at offset %d", ErrCorrupt, segName(r.first), r.off)
}

func (r *Reader) closeFile() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
	r.buf, r.bufOff, r.off = r.buf[:0], 0, 0
}

// Close releases the Reader's file.
func (r *Reader) Close() error {
	r.closeFile()
	r.buf = nil
	return nil
}
