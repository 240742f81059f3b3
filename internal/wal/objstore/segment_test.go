package objstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEncodeSegmentBytes pins the segment format byte for byte.
func TestEncodeSegmentBytes(t *testing.T) {
	got, err := EncodeSegment(7, [][]byte{[]byte("ab"), {}}, Compression{Codec: CodecZstd})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		'F', 'P', 'W', 'S', 1, 0, // magic, version, codec none (body < MinCompressBytes)
		7, 0, 0, 0, 0, 0, 0, 0, // first seq
		2, 0, 0, 0, // count
		10, 0, 0, 0, // stored body length
		0x0e, 0x57, 0x86, 0x48, // CRC-32C of the body
		2, 0, 0, 0, 'a', 'b', // entry 7
		0, 0, 0, 0, // entry 8, empty
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("segment bytes (-want +got):\n%s", diff)
	}
	seg, err := DecodeSegment(got)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Segment{First: 7, Entries: [][]byte{[]byte("ab"), {}}}, seg); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s", diff)
	}
}

func bigEntries(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("%06d", i) + strings.Repeat("{\"reading\":5,\"device\":\"fan\"}", size/28+1))[:size]
	}
	return out
}

// TestSegmentRoundTrip encodes bodies above MinCompressBytes with every
// codec and checks they are compressed (codec byte, smaller) and decode to
// the same entries.
func TestSegmentRoundTrip(t *testing.T) {
	entries := bigEntries(100, 300)
	for _, c := range []Compression{{}, {Codec: CodecGzip}, {Codec: CodecGzip, Level: 9}, {Codec: CodecZstd}, {Codec: CodecZstd, Level: 9}, {Codec: CodecLZ4}, {Codec: CodecLZ4, Level: 12}} {
		t.Run(fmt.Sprintf("codec%d-level%d", c.Codec, c.Level), func(t *testing.T) {
			data, err := EncodeSegment(1000, entries, c)
			if err != nil {
				t.Fatal(err)
			}
			if Codec(data[5]) != c.Codec {
				t.Fatalf("codec byte %d, want %d", data[5], c.Codec)
			}
			if c.Codec != CodecNone && len(data) > 100*300/4 {
				t.Errorf("compressed segment is %d bytes for %d bytes of entries", len(data), 100*300)
			}
			seg, err := DecodeSegment(data)
			if err != nil {
				t.Fatal(err)
			}
			if seg.First != 1000 || !slices.EqualFunc(seg.Entries, entries, bytes.Equal) {
				t.Fatalf("round trip: first %d, %d entries; want 1000 and the %d entries encoded", seg.First, len(seg.Entries), len(entries))
			}
		})
	}
}

// TestDecodeSegmentCorrupt checks every way a segment can be damaged is
// refused with ErrCorruptSegment and a message saying why.
func TestDecodeSegmentCorrupt(t *testing.T) {
	good, err := EncodeSegment(1, [][]byte{[]byte("hello"), []byte("world")}, Compression{})
	if err != nil {
		t.Fatal(err)
	}
	zgood, err := EncodeSegment(1, bigEntries(50, 300), Compression{Codec: CodecZstd})
	if err != nil {
		t.Fatal(err)
	}
	mod := func(src []byte, f func(b []byte) []byte) []byte { return f(bytes.Clone(src)) }
	// reframe replaces the body and fixes length and CRC, so that only the
	// body's structure is wrong.
	reframe := func(codec byte, count uint32, body []byte) []byte {
		b, _ := encodeBody(1, int(count), body, Compression{})
		b[5] = codec
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "0 bytes, shorter than the 26-byte header"},
		{"header cut", good[:20], "20 bytes, shorter than the 26-byte header"},
		{"truncated body", good[:len(good)-3], "body of 15 bytes, header says 18 (truncated?)"},
		{"extra byte", append(bytes.Clone(good), 0), "body of 19 bytes, header says 18 (truncated?)"},
		{"magic", mod(good, func(b []byte) []byte { b[0] = 'X'; return b }), "no segment magic"},
		{"version", mod(good, func(b []byte) []byte { b[4] = 9; return b }), "version 9, want 1"},
		{"flipped bit", mod(good, func(b []byte) []byte { b[headerLen+5] ^= 1; return b }), "checksum mismatch"},
		{"unknown codec", reframe(7, 0, nil), "unknown codec 7"},
		{"count too large", reframe(0, 1000, make([]byte, 8)), "1000 entries cannot fit in 8 bytes"},
		{"entry overruns", reframe(0, 1, binary.LittleEndian.AppendUint32(nil, 5)), "entry 0: 5 bytes, 0 left"},
		{"trailing bytes", reframe(0, 1, []byte{0, 0, 0, 0, 1, 2, 3, 4}), "4 bytes after the last entry"},
		{"bad zstd", reframe(byte(CodecZstd), 0, []byte("not zstd at all")), "decompress:"},
		{"cut zstd", reframe(byte(CodecZstd), 50, zgood[headerLen:len(zgood)-10]), "decompress:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeSegment(tc.data)
			if !errors.Is(err, ErrCorruptSegment) {
				t.Fatalf("err = %v, want ErrCorruptSegment", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want it to say %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeSegment feeds arbitrary bytes (a bucket's content is not
// trusted) to DecodeSegment: it must not panic, and what it accepts must
// encode back to a segment that decodes the same.
func FuzzDecodeSegment(f *testing.F) {
	for _, c := range []Compression{{}, {Codec: CodecZstd}, {Codec: CodecGzip}, {Codec: CodecLZ4}} {
		s, _ := EncodeSegment(3, bigEntries(40, 300), c)
		f.Add(s)
	}
	s, _ := EncodeSegment(1, [][]byte{[]byte("x")}, Compression{})
	f.Add(s)
	f.Fuzz(func(t *testing.T, data []byte) {
		seg, err := DecodeSegment(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptSegment) {
				t.Fatalf("error %v does not match ErrCorruptSegment", err)
			}
			return
		}
		again, err := EncodeSegment(seg.First, seg.Entries, Compression{})
		if err != nil {
			t.Fatal(err)
		}
		seg2, err := DecodeSegment(again)
		if err != nil {
			t.Fatal(err)
		}
		if seg.First != seg2.First || !slices.EqualFunc(seg.Entries, seg2.Entries, bytes.Equal) {
			t.Fatal("re-encoded segment decodes differently")
		}
	})
}
