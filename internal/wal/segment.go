package wal

import "math/bits"

// segment is the in-memory view of one segment file: which entries it holds
// and which of them are acknowledged. Entries in a segment are contiguous.
type segment struct {
	first  uint64   // sequence number in the file name; the first entry's seq
	n      uint64   // entries first .. first+n-1 are in the file
	nAcked uint64   // how many of them are acknowledged
	bits   []uint64 // bit i set: entry first+i is acknowledged
	size   int64    // bytes in the file
	// entryLens holds each entry's payload length while Open recovers the
	// segment, to count the bytes Replay will visit; nil afterwards.
	entryLens []uint32
}

func (s *segment) name() string { return segName(s.first) }

func (s *segment) contains(seq uint64) bool { return seq >= s.first && seq-s.first < s.n }

// done reports whether every entry of the segment is acknowledged.
func (s *segment) done() bool { return s.nAcked == s.n }

func (s *segment) isAcked(seq uint64) bool {
	i := seq - s.first
	return s.bits[i/64]&(1<<(i%64)) != 0
}

// ack marks seq acknowledged and reports whether it was not already.
func (s *segment) ack(seq uint64) bool {
	i := seq - s.first
	w, b := &s.bits[i/64], uint64(1)<<(i%64)
	if *w&b != 0 {
		return false
	}
	*w |= b
	s.nAcked++
	return true
}

// grow extends the segment to hold n entries.
func (s *segment) grow(n uint64) {
	words := int((n + 63) / 64)
	for len(s.bits) < words {
		s.bits = append(s.bits, 0)
	}
	s.n = n
}

// pending is the number of unacknowledged entries.
func (s *segment) pending() uint64 { return s.n - s.nAcked }

// appendUnacked appends the unacknowledged entries below seq `below` as
// ranges, merging with the last range of dst when they touch.
func (s *segment) appendUnacked(dst []seqRange, below uint64) []seqRange {
	if below <= s.first || s.done() {
		return dst
	}
	m := min(s.n, below-s.first)
	add := func(lo, hi uint64) {
		if k := len(dst) - 1; k >= 0 && dst[k].hi == lo {
			dst[k].hi = hi
			return
		}
		dst = append(dst, seqRange{lo, hi})
	}
	for i := uint64(0); i < m; {
		w := s.bits[i/64] >> (i % 64)
		if w == 0 {
			// The rest of this word is unacknowledged.
			end := min(m, (i/64+1)*64)
			add(s.first+i, s.first+end)
			i = end
			continue
		}
		if z := uint64(bits.TrailingZeros64(w)); z > 0 {
			end := min(m, i+z)
			add(s.first+i, s.first+end)
			i = end
			continue
		}
		// Skip the run of acknowledged entries.
		i = min(m, i+uint64(bits.TrailingZeros64(^w)))
	}
	return dst
}
