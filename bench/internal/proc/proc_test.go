package proc

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       time.Duration
		bad        bool
	}{
		{"plain", "42 (hub) S 1 42 42 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 9 0 5 0", 2870 * time.Millisecond, false},
		{"name with spaces and parentheses", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0", 70 * time.Millisecond, false},
		{"no name", "7 a R 1", 0, true},
		{"short", "7 (x) R 1 2 3", 0, true},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 u s 0 0", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.line))
			if (err != nil) != tc.bad || got != tc.want {
				t.Fatalf("parseStat = %v, %v; want %v, error %v", got, err, tc.want, tc.bad)
			}
		})
	}
}

func TestSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, err := CPU(os.Getpid()); err != ErrUnsupported {
			t.Fatalf("CPU off Linux: %v", err)
		}
		return
	}
	// Burn some CPU so that the reading cannot be zero.
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	if c, err := CPU(os.Getpid()); err != nil || c <= 0 {
		t.Fatalf("CPU(self) = %v, %v", c, err)
	}
	if r, err := PeakRSS(os.Getpid()); err != nil || r < 1<<20 {
		t.Fatalf("PeakRSS(self) = %d, %v", r, err)
	}
	if _, err := CPU(-1); err == nil {
		t.Fatal("CPU(-1) did not fail")
	}
}
