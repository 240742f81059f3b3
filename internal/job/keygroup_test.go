package job_test

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/flowplane/flowplane/internal/job"
)

// Vectors of MurmurHash3 x86_32 with seed 0, as published with the
// reference implementation (SMHasher) and its ports (e.g. Python's mmh3).
func TestMurmur3Vectors(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint32
	}{
		{"", 0},
		{"a", 0x3c2569b2},
		{"ab", 0x9bbfd75f},
		{"abc", 0xb3dd93fa},
		{"abcd", 0x43ed676a},
		{"hello", 0x248bfa47},
		{"The quick brown fox jumps over the lazy dog", 0x2e4ff723},
	} {
		if got := job.Murmur3([]byte(tt.in)); got != tt.want {
			t.Errorf("Murmur3(%q) = %#x, want %#x", tt.in, got, tt.want)
		}
	}
}

// TestKeyGroupGolden pins key -> key group at max_parallelism 128. These
// values are part of state format_version 1: keyed state written under
// one key group must be found there again after a restore, so a change
// here is a new format_version, never a fix.
func TestKeyGroupGolden(t *testing.T) {
	for _, tt := range []struct {
		key  any
		want int
	}{
		{"user-1", 99},
		{"user-42", 80},
		{"", 0},
		{42.0, 54},
		{42, 54},
		{"42", 54},
		{"hello", 71},
	} {
		if got := job.KeyGroup(job.CanonicalKey(tt.key), 128); got != tt.want {
			t.Errorf("KeyGroup(CanonicalKey(%#v), 128) = %d, want %d", tt.key, got, tt.want)
		}
	}
}

func TestCanonicalKey(t *testing.T) {
	for _, tt := range []struct {
		in   any
		want string
	}{
		{"user-1", "user-1"},
		{"", ""},
		{[]byte("raw"), "raw"},
		{42.0, "42"},
		{42, "42"},
		{int64(-7), "-7"},
		{math.Copysign(0, -1), "0"},
		{1.5, "1.5"},
		{1e21, "1e+21"},
		{float64(1 << 53), "9.007199254740992e+15"},
		{float64(1<<53 - 1), "9007199254740991"},
		{math.Inf(1), "+Inf"},
		{true, "true"},
		{false, "false"},
		{nil, "null"},
		{map[string]any{"b": 1.0, "a": "x"}, `{"a":"x","b":1}`},
		{[]any{"a", 2.0, nil}, `["a",2,null]`},
	} {
		if got := string(job.CanonicalKey(tt.in)); got != tt.want {
			t.Errorf("CanonicalKey(%#v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := string(job.AppendCanonicalKey([]byte("p:"), 3.0)); got != "p:3" {
		t.Errorf("AppendCanonicalKey = %q", got)
	}
}

// TestKeyGroupRanges checks the range arithmetic for any parallelism and
// max_parallelism: the ranges of the subtasks are contiguous, cover every
// key group once, differ in size by at most one, and the subtask SubtaskOf
// names for a key group is the one whose range holds it.
func TestKeyGroupRanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxP := rapid.IntRange(1, 32768).Draw(t, "max_parallelism")
		p := rapid.IntRange(1, maxP).Draw(t, "parallelism")
		next, minLen, maxLen := 0, math.MaxInt, 0
		for i := range p {
			r := job.RangeOf(i, p, maxP)
			if r.Start != next {
				t.Fatalf("subtask %d starts at %d, want %d", i, r.Start, next)
			}
			if r.Len() < 1 {
				t.Fatalf("subtask %d owns no key group: %+v", i, r)
			}
			minLen, maxLen = min(minLen, r.Len()), max(maxLen, r.Len())
			next = r.End + 1
		}
		if next != maxP {
			t.Fatalf("ranges end at %d, want %d", next-1, maxP-1)
		}
		if maxLen-minLen > 1 {
			t.Fatalf("range sizes from %d to %d", minLen, maxLen)
		}
		kg := rapid.IntRange(0, maxP-1).Draw(t, "key_group")
		s := job.SubtaskOf(kg, p, maxP)
		if s < 0 || s >= p || !job.RangeOf(s, p, maxP).Contains(kg) {
			t.Fatalf("SubtaskOf(%d) = %d, whose range %+v does not hold it", kg, s, job.RangeOf(s, p, maxP))
		}
	})
}

// TestSubtaskOfEveryKeyGroup checks SubtaskOf against the ranges for every
// key group of a few shapes, including the extremes.
func TestSubtaskOfEveryKeyGroup(t *testing.T) {
	for _, c := range [][2]int{{1, 1}, {1, 128}, {2, 128}, {3, 128}, {7, 100}, {128, 128}, {3, 32768}, {32768, 32768}} {
		p, maxP := c[0], c[1]
		for kg := range maxP {
			s := job.SubtaskOf(kg, p, maxP)
			if !job.RangeOf(s, p, maxP).Contains(kg) {
				t.Fatalf("p=%d max=%d: SubtaskOf(%d) = %d, range %+v", p, maxP, kg, s, job.RangeOf(s, p, maxP))
			}
		}
	}
}

func TestKeyGroupInRange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxP := rapid.IntRange(1, 32768).Draw(t, "max_parallelism")
		key := rapid.SliceOf(rapid.Byte()).Draw(t, "key")
		if kg := job.KeyGroup(key, maxP); kg < 0 || kg >= maxP {
			t.Fatalf("KeyGroup = %d, outside [0, %d)", kg, maxP)
		}
	})
}
