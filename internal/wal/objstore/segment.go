package objstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// A segment is a header followed by its body, the body compressed or not:
//
//	header: "FPWS" | version u8 (1) | codec u8 | first seq u64 | count u32 |
//	        stored body length u32 | CRC-32C of the stored body u32
//	body:   count × ( len u32 | payload )
//
// integers little endian; entries have the consecutive sequence numbers
// first, first+1, ...
const (
	segMagic   = "FPWS"
	segVersion = 1
	headerLen  = 4 + 1 + 1 + 8 + 4 + 4 + 4
)

// Codec is a segment body's compression.
type Codec uint8

// The codecs.
const (
	CodecNone Codec = 0
	CodecGzip Codec = 1
	CodecZstd Codec = 2
	CodecLZ4  Codec = 3
)

// MinCompressBytes is the body size below which a segment is stored
// uncompressed whatever the compression: compressing less costs more CPU
// than it saves (ArkFlow's threshold).
const MinCompressBytes = 10 << 10

// MaxEntryBytes bounds one entry.
const MaxEntryBytes = 1<<31 - 1

// ErrCorruptSegment reports a segment that does not decode: truncated,
// changed or not a segment. Its message names the reason.
var ErrCorruptSegment = errors.New("objstore: corrupt segment")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Compression is a segment codec and its level (0: the codec's default).
type Compression struct {
	Codec Codec
	Level int
}

// EncodeSegment encodes the entries with sequence numbers first, first+1,
// ... as a segment, compressing a body of MinCompressBytes or more.
func EncodeSegment(first uint64, entries [][]byte, c Compression) ([]byte, error) {
	n := 0
	for _, e := range entries {
		n += 4 + len(e)
	}
	body := make([]byte, 0, n)
	for _, e := range entries {
		body = binary.LittleEndian.AppendUint32(body, uint32(len(e)))
		body = append(body, e...)
	}
	return encodeBody(first, len(entries), body, c)
}

// encodeBody frames an encoded body (count entries from first).
func encodeBody(first uint64, count int, body []byte, c Compression) ([]byte, error) {
	codec := CodecNone
	if c.Codec != CodecNone && len(body) >= MinCompressBytes {
		z, err := compress(body, c)
		if err != nil {
			return nil, err
		}
		body, codec = z, c.Codec
	}
	out := make([]byte, headerLen, headerLen+len(body))
	copy(out, segMagic)
	out[4] = segVersion
	out[5] = byte(codec)
	binary.LittleEndian.PutUint64(out[6:], first)
	binary.LittleEndian.PutUint32(out[14:], uint32(count))
	binary.LittleEndian.PutUint32(out[18:], uint32(len(body)))
	binary.LittleEndian.PutUint32(out[22:], crc32.Checksum(body, castagnoli))
	return append(out, body...), nil
}

func compress(body []byte, c Compression) ([]byte, error) {
	var buf bytes.Buffer
	var w io.WriteCloser
	var err error
	switch c.Codec {
	case CodecGzip:
		level := c.Level
		if level == 0 {
			level = gzip.DefaultCompression
		}
		w, err = gzip.NewWriterLevel(&buf, level)
	case CodecZstd:
		level := c.Level
		if level == 0 {
			level = 3
		}
		w, err = zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)), zstd.WithEncoderConcurrency(1))
	case CodecLZ4:
		zw := lz4.NewWriter(&buf)
		if c.Level > 0 {
			err = zw.Apply(lz4.CompressionLevelOption(lz4Level(c.Level)))
		}
		w = zw
	default:
		return nil, fmt.Errorf("objstore: unknown codec %d", c.Codec)
	}
	if err != nil {
		return nil, fmt.Errorf("objstore: compress: %w", err)
	}
	if _, err := w.Write(body); err != nil {
		return nil, fmt.Errorf("objstore: compress: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("objstore: compress: %w", err)
	}
	return buf.Bytes(), nil
}

// lz4Level maps ArkFlow's lz4 levels (1-16) to the library's (1-9).
func lz4Level(l int) lz4.CompressionLevel {
	levels := []lz4.CompressionLevel{lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4, lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}
	return levels[min(max(l, 1), 9)-1]
}

// Segment is a decoded segment.
type Segment struct {
	First   uint64
	Entries [][]byte // Entries[i] has sequence number First+i
}

// maxBody bounds a decompressed body, so that a hostile segment cannot
// make the decoder allocate without bound.
const maxBody = 1 << 31

// DecodeSegment decodes and verifies a segment. Every failure matches
// ErrCorruptSegment and says what is wrong.
func DecodeSegment(data []byte) (Segment, error) {
	bad := func(format string, args ...any) (Segment, error) {
		return Segment{}, fmt.Errorf("%w: %s", ErrCorruptSegment, fmt.Sprintf(format, args...))
	}
	if len(data) < headerLen {
		return bad("%d bytes, shorter than the %d-byte header", len(data), headerLen)
	}
	if string(data[:4]) != segMagic {
		return bad("no segment magic")
	}
	if data[4] != segVersion {
		return bad("version %d, want %d", data[4], segVersion)
	}
	codec := Codec(data[5])
	first := binary.LittleEndian.Uint64(data[6:])
	count := binary.LittleEndian.Uint32(data[14:])
	blen := binary.LittleEndian.Uint32(data[18:])
	sum := binary.LittleEndian.Uint32(data[22:])
	body := data[headerLen:]
	if uint64(len(body)) != uint64(blen) {
		return bad("body of %d bytes, header says %d (truncated?)", len(body), blen)
	}
	if crc32.Checksum(body, castagnoli) != sum {
		return bad("checksum mismatch")
	}
	var err error
	switch codec {
	case CodecNone:
	case CodecGzip, CodecZstd, CodecLZ4:
		if body, err = decompress(codec, body); err != nil {
			return bad("%v", err)
		}
	default:
		return bad("unknown codec %d", codec)
	}
	if uint64(count) > uint64(len(body))/4 {
		return bad("%d entries cannot fit in %d bytes", count, len(body))
	}
	s := Segment{First: first, Entries: make([][]byte, 0, count)}
	for i := range count {
		if len(body) < 4 {
			return bad("entry %d: truncated length", i)
		}
		n := binary.LittleEndian.Uint32(body)
		body = body[4:]
		if uint64(n) > uint64(len(body)) {
			return bad("entry %d: %d bytes, %d left", i, n, len(body))
		}
		s.Entries = append(s.Entries, body[:n:n])
		body = body[n:]
	}
	if len(body) != 0 {
		return bad("%d bytes after the last entry", len(body))
	}
	return s, nil
}

func decompress(c Codec, body []byte) ([]byte, error) {
	var r io.Reader
	switch c {
	case CodecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		r = zr
	case CodecZstd:
		zr, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxBody))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	case CodecLZ4:
		r = lz4.NewReader(bytes.NewReader(body))
	}
	out, err := io.ReadAll(io.LimitReader(r, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	if len(out) > maxBody {
		return nil, errors.New("decompressed body too large")
	}
	return out, nil
}
