package job

import "math/bits"

// Range is an inclusive range of key groups [Start, End]. Subtask i of an
// operator at parallelism p owns RangeOf(i, p, maxParallelism).
type Range struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// Contains reports whether key group kg is in r.
func (r Range) Contains(kg int) bool { return kg >= r.Start && kg <= r.End }

// Len is the number of key groups in r.
func (r Range) Len() int { return r.End - r.Start + 1 }

// KeyGroup is the key group of a canonical key: murmur3's 32-bit hash
// (seed 0) of the bytes, modulo maxParallelism. The hash is part of the
// state format: changing it changes FormatVersion's meaning.
func KeyGroup(key []byte, maxParallelism int) int {
	return int(Murmur3(key) % uint32(maxParallelism))
}

// SubtaskOf is the subtask that owns key group kg at the given parallelism
// (Flink's KeyGroupRangeAssignment arithmetic).
func SubtaskOf(kg, parallelism, maxParallelism int) int {
	return kg * parallelism / maxParallelism
}

// RangeOf is the contiguous key-group range subtask i owns: from
// ceil(i*max/p) to floor(((i+1)*max-1)/p).
func RangeOf(i, parallelism, maxParallelism int) Range {
	start := (i*maxParallelism + parallelism - 1) / parallelism
	end := ((i+1)*maxParallelism - 1) / parallelism
	return Range{Start: start, End: end}
}

// Murmur3 is MurmurHash3's x86 32-bit hash of b with seed 0.
func Murmur3(b []byte) uint32 {
	const (
		c1 = 0xcc9e2d51
		c2 = 0x1b873593
	)
	var h uint32
	n := len(b)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch n - i {
	case 3:
		k ^= uint32(b[i+2]) << 16
		fallthrough
	case 2:
		k ^= uint32(b[i+1]) << 8
		fallthrough
	case 1:
		k ^= uint32(b[i])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
