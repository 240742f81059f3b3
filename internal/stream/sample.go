package stream

import (
	"sync"
	"time"
)

// logSampler lets one log line of a kind through per interval and counts
// the ones it held back, so that a processor failing on every batch cannot
// flood the log (the counters still count every failure).
type logSampler struct {
	interval time.Duration

	mu         sync.Mutex // guards the fields below
	last       time.Time
	suppressed int
}

// allow reports whether a line may be logged at now and, if so, how many
// were suppressed since the last one.
func (l *logSampler) allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.interval {
		l.suppressed++
		return false, 0
	}
	l.last, suppressed, l.suppressed = now, l.suppressed, 0
	return true, suppressed
}
