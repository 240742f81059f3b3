package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
)

// scanned is what the scan of the segment files found.
type scanned struct {
	segs   []*segment // size is the length of the verified prefix
	sizes  []int64    // file sizes
	ckpt   *checkpoint
	acks   []uint64
	next   uint64 // the first seq above every entry found
	report Recovery
}

// recover rebuilds the WAL's state from its directory and opens the active
// segment. It runs in Open, before the committer starts.
func (w *WAL) recover() (Recovery, error) {
	dir := w.opts.Dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Recovery{}, fmt.Errorf("%w: %w", ErrOpen, err)
	}
	sc, err := w.scanDir()
	if err != nil {
		return Recovery{}, err
	}
	applyAcks(sc)

	// Open the active segment: the last one, cut back to its verified prefix,
	// unless its name does not fit the next seq (or there is none).
	var created bool
	if k := len(sc.segs) - 1; k >= 0 && sc.segs[k].first+sc.segs[k].n == sc.next {
		s := sc.segs[k]
		f, err := os.OpenFile(segPath(dir, s.first), os.O_RDWR, 0)
		if err != nil {
			return Recovery{}, fmt.Errorf("%w: %w", ErrOpen, err)
		}
		w.f = f
		if s.size < sc.sizes[k] {
			if err := f.Truncate(s.size); err != nil {
				f.Close()
				return Recovery{}, fmt.Errorf("%w: truncate torn tail: %w", ErrOpen, err)
			}
			sc.sizes[k] = s.size
		}
		if _, err := f.Seek(s.size, io.SeekStart); err != nil {
			f.Close()
			return Recovery{}, fmt.Errorf("%w: %w", ErrOpen, err)
		}
	} else {
		f, err := os.OpenFile(segPath(dir, sc.next), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return Recovery{}, fmt.Errorf("%w: %w", ErrOpen, err)
		}
		w.f = f
		sc.segs = append(sc.segs, &segment{first: sc.next})
		sc.sizes = append(sc.sizes, 0)
		created = true
	}
	active := sc.segs[len(sc.segs)-1]
	w.size, w.entries = active.size, active.n

	// Snapshot what Replay must visit, before anything is deleted.
	pending := 0
	for _, s := range sc.segs {
		for i, n := range s.entryLens {
			if !s.isAcked(s.first + uint64(i)) {
				sc.report.PendingBytes += int64(n)
			}
		}
		s.entryLens = nil
		if p := s.pending(); p > 0 {
			pending += int(p)
			w.replay = append(w.replay, &segment{first: s.first, n: s.n, nAcked: s.nAcked, bits: slices.Clone(s.bits), size: s.size})
		}
	}
	// A checkpoint in the active segment covers every ack recorded in older
	// segments, so those may now be deleted.
	for i, s := range sc.segs {
		s.size = sc.sizes[i] // the files' sizes from here on
	}
	w.segs = sc.segs
	w.next, w.written, w.pending = sc.next, sc.next, uint64(pending)
	if err := w.writeCheckpoint(sc.next); err != nil {
		w.f.Close()
		return Recovery{}, fmt.Errorf("%w: %w", ErrOpen, err)
	}
	active.size = w.size
	if created {
		if err := w.syncDir(); err != nil {
			w.f.Close()
			return Recovery{}, fmt.Errorf("%w: %w", ErrOpen, err)
		}
	}
	var drop []*segment
	w.segs = slices.DeleteFunc(w.segs, func(s *segment) bool {
		if s != active && s.done() {
			drop = append(drop, s)
			return true
		}
		return false
	})
	for _, s := range drop {
		w.remove(s)
	}
	sc.report.Pending = pending
	return sc.report, nil
}

// scanDir verifies every segment file in name order.
func (w *WAL) scanDir() (*scanned, error) {
	ents, err := os.ReadDir(w.opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOpen, err)
	}
	var firsts []uint64
	for _, e := range ents {
		if first, ok := parseSegName(e.Name()); ok {
			firsts = append(firsts, first)
		}
	}
	slices.Sort(firsts)
	sc := &scanned{next: 1}
	for i, first := range firsts {
		if err := w.scanSegment(sc, first, i == len(firsts)-1); err != nil {
			return nil, err
		}
	}
	if k := len(sc.segs) - 1; k >= 0 && sc.segs[k].n == 0 {
		// An empty last segment may start later than the entries before it
		// (their segments were deleted): the next entry is its first.
		sc.next = max(sc.next, sc.segs[k].first)
	}
	return sc, nil
}

// scanSegment reads one segment. Entries must follow each other from the
// seq in the file name on, above every entry of earlier segments; anything
// else is damage, like a record that fails its checksum.
func (w *WAL) scanSegment(sc *scanned, first uint64, last bool) error {
	name := segName(first)
	f, err := os.Open(segPath(w.opts.Dir, first))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrOpen, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrOpen, err)
	}
	size := fi.Size()
	rd := newScanner(f, size, true)
	var (
		valid int64
		n     uint64
		ckpt  *checkpoint
		acks  []uint64
		lens  []uint32
	)
	for {
		r, ok := rd.next()
		if !ok {
			break
		}
		switch r.kind {
		case kindEntry:
			ok = r.seq == first+n && r.seq >= sc.next
			if ok {
				n++
				lens = append(lens, uint32(len(r.payload)))
			}
		case kindAck:
			mark := len(acks)
			if ok = decodeAckPayload(r.payload, func(seq uint64) { acks = append(acks, seq) }) == nil; !ok {
				acks = acks[:mark]
			}
		case kindCheckpoint:
			c, err := decodeCheckpointPayload(r.payload)
			if ok = err == nil; ok {
				ckpt = &c
			}
		}
		if !ok {
			rd.err = errBadRecord
			break
		}
		valid = rd.off
	}
	if rd.err != nil && !errors.Is(rd.err, errBadRecord) {
		return fmt.Errorf("%w: read %s: %w", ErrOpen, name, rd.err)
	}

	s := &segment{first: first, size: valid, entryLens: lens}
	s.grow(n)
	if n > 0 {
		sc.next = first + n
	}
	if ckpt != nil {
		sc.ckpt = ckpt
	}
	sc.acks = append(sc.acks, acks...)
	if dropped := size - valid; dropped > 0 {
		sc.report.TruncatedBytes += dropped
		if last {
			w.log.Warn("WAL segment has a torn or unsynced tail; truncating it",
				"segment", name, "offset", valid, "bytes", dropped)
		} else {
			if sc.report.CorruptSegment == "" {
				sc.report.CorruptSegment = name
			}
			w.log.Error("WAL segment is damaged; the entries after the damage are lost",
				"segment", name, "offset", valid, "bytes", dropped)
		}
	}
	sc.segs = append(sc.segs, s)
	sc.sizes = append(sc.sizes, size)
	return nil
}

// applyAcks marks acknowledged entries: those the latest checkpoint does not
// list as unacknowledged, and those of every ack record.
func applyAcks(sc *scanned) {
	if c := sc.ckpt; c != nil {
		for _, s := range sc.segs {
			if s.first >= c.next {
				continue
			}
			for seq := s.first; seq < s.first+s.n && seq < c.next; seq++ {
				if !c.unackedBelow(seq) {
					s.ack(seq)
				}
			}
		}
	}
	for _, seq := range sc.acks {
		i := sort.Search(len(sc.segs), func(i int) bool { return sc.segs[i].first > seq }) - 1
		if i >= 0 && sc.segs[i].contains(seq) {
			sc.segs[i].ack(seq)
		}
	}
}
