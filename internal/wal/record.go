package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Record kinds.
const (
	kindEntry      byte = 1
	kindAck        byte = 2
	kindCheckpoint byte = 3
)

const (
	headerSize = 17 // len u32, crc u32, seq u64, kind u8
	segSuffix  = ".wal"
	// maxAcksPerRecord bounds the size of one ack record.
	maxAcksPerRecord = 1 << 16
)

// MaxEntryBytes is the largest payload one entry may carry.
const MaxEntryBytes = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// payloadCRC is the first half of a record's checksum; it needs no lock.
func payloadCRC(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// appendRecord appends one record to dst; pcrc is payloadCRC(payload).
func appendRecord(dst []byte, kind byte, seq uint64, pcrc uint32, payload []byte) []byte {
	var h [headerSize]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint64(h[8:16], seq)
	h[16] = kind
	binary.LittleEndian.PutUint32(h[4:8], finishCRC(pcrc, &h))
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}

func finishCRC(pcrc uint32, h *[headerSize]byte) uint32 {
	crc := crc32.Update(pcrc, castagnoli, h[0:4])
	return crc32.Update(crc, castagnoli, h[8:headerSize])
}

// segName is the file name of the segment whose first entry is seq.
func segName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, segSuffix) }

// parseSegName returns the first sequence number a segment file name encodes.
func parseSegName(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, segSuffix)
	if !ok || len(base) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(base, 10, 64)
	// Leave room above the first seq so that seq arithmetic cannot wrap.
	return n, err == nil && n > 0 && n < 1<<62
}

func segPath(dir string, seq uint64) string { return filepath.Join(dir, segName(seq)) }

// record is one decoded record.
type record struct {
	kind    byte
	seq     uint64
	payload []byte
}

var errBadRecord = errors.New("bad record")

// scanner reads the records of one segment, stopping at the first record
// that is incomplete or fails its checksum.
type scanner struct {
	r     *bufio.Reader
	limit int64 // bytes that may be read
	off   int64 // end of the last good record
	reuse bool  // payload buffers may be reused between records
	buf   []byte
	err   error // why scanning stopped early: errBadRecord or an I/O error
}

func newScanner(r io.Reader, limit int64, reuse bool) *scanner {
	return &scanner{r: bufio.NewReaderSize(r, 256<<10), limit: limit, reuse: reuse}
}

// next returns the next good record, or false at the end of the segment or at
// the first bad record (then s.err is set).
func (s *scanner) next() (record, bool) {
	rest := s.limit - s.off
	if rest == 0 {
		return record{}, false
	}
	var h [headerSize]byte
	if rest < headerSize {
		return s.fail(errBadRecord)
	}
	if _, err := io.ReadFull(s.r, h[:]); err != nil {
		return s.fail(readErr(err))
	}
	n := int64(binary.LittleEndian.Uint32(h[0:4]))
	if n > MaxEntryBytes || n > rest-headerSize {
		return s.fail(errBadRecord)
	}
	var p []byte
	if s.reuse {
		if int64(cap(s.buf)) < n {
			s.buf = make([]byte, n)
		}
		p = s.buf[:n]
	} else {
		p = make([]byte, n)
	}
	if _, err := io.ReadFull(s.r, p); err != nil {
		return s.fail(readErr(err))
	}
	rec := record{kind: h[16], seq: binary.LittleEndian.Uint64(h[8:16]), payload: p}
	if finishCRC(payloadCRC(p), &h) != binary.LittleEndian.Uint32(h[4:8]) {
		return s.fail(errBadRecord)
	}
	switch rec.kind {
	case kindEntry:
		if rec.seq == 0 {
			return s.fail(errBadRecord)
		}
	case kindAck, kindCheckpoint:
	default:
		return s.fail(errBadRecord)
	}
	s.off += headerSize + n
	return rec, true
}

func (s *scanner) fail(err error) (record, bool) {
	s.err = err
	return record{}, false
}

// readErr maps a short read (the file shrank under us) to a bad record.
func readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errBadRecord
	}
	return err
}

// seqRange is the half-open interval [lo, hi) of sequence numbers.
type seqRange struct{ lo, hi uint64 }

// appendAckPayload encodes sorted, distinct sequence numbers as deltas.
func appendAckPayload(dst []byte, seqs []uint64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(seqs)))
	var prev uint64
	for _, s := range seqs {
		dst = binary.AppendUvarint(dst, s-prev)
		prev = s
	}
	return dst
}

func decodeAckPayload(p []byte, fn func(seq uint64)) error {
	n, p, err := uvarint(p)
	if err != nil || n > uint64(len(p)) {
		return errBadRecord
	}
	var prev uint64
	for range n {
		var d uint64
		if d, p, err = uvarint(p); err != nil {
			return err
		}
		prev += d
		fn(prev)
	}
	return nil
}

// appendCheckpointPayload encodes "every seq below next is acknowledged
// except those in unacked" (sorted, disjoint ranges below next).
func appendCheckpointPayload(dst []byte, next uint64, unacked []seqRange) []byte {
	dst = binary.AppendUvarint(dst, next)
	dst = binary.AppendUvarint(dst, uint64(len(unacked)))
	var prev uint64
	for _, r := range unacked {
		dst = binary.AppendUvarint(dst, r.lo-prev)
		dst = binary.AppendUvarint(dst, r.hi-r.lo)
		prev = r.hi
	}
	return dst
}

// checkpoint is a decoded checkpoint record.
type checkpoint struct {
	next    uint64
	unacked []seqRange
}

func decodeCheckpointPayload(p []byte) (checkpoint, error) {
	var c checkpoint
	next, p, err := uvarint(p)
	if err != nil {
		return c, err
	}
	n, p, err := uvarint(p)
	if err != nil || n > uint64(len(p)) {
		return c, errBadRecord
	}
	c.next = next
	c.unacked = make([]seqRange, 0, n)
	var prev uint64
	for range n {
		var gap, length uint64
		if gap, p, err = uvarint(p); err != nil {
			return c, err
		}
		if length, p, err = uvarint(p); err != nil {
			return c, err
		}
		lo := prev + gap
		hi := lo + length
		if lo < prev || hi < lo || hi > next {
			return c, errBadRecord
		}
		c.unacked = append(c.unacked, seqRange{lo, hi})
		prev = hi
	}
	return c, nil
}

// unackedBelow reports whether seq is in one of the (sorted) ranges.
func (c *checkpoint) unackedBelow(seq uint64) bool {
	_, found := slices.BinarySearchFunc(c.unacked, seq, func(r seqRange, s uint64) int {
		switch {
		case r.hi <= s:
			return -1
		case r.lo > s:
			return 1
		}
		return 0
	})
	return found
}

func uvarint(p []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, p, errBadRecord
	}
	return v, p[n:], nil
}
