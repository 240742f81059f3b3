package stream

import (
	"testing"
	"time"
)

func TestLogSampler(t *testing.T) {
	l := logSampler{interval: time.Second}
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at         time.Duration
		ok         bool
		suppressed int
	}{
		{0, true, 0},
		{100 * time.Millisecond, false, 0},
		{900 * time.Millisecond, false, 0},
		{time.Second, true, 2},
		{time.Second + time.Millisecond, false, 0},
		{5 * time.Second, true, 1},
	}
	for i, s := range steps {
		ok, n := l.allow(t0.Add(s.at))
		if ok != s.ok || n != s.suppressed {
			t.Errorf("step %d: allow = %v, %d; want %v, %d", i, ok, n, s.ok, s.suppressed)
		}
	}
}
