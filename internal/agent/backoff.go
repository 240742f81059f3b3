package agent

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// backoff is a capped exponential delay with full jitter in its upper
// half: attempt n (from 1) waits between d/2 and d, d = min(max, min*2^(n-1)).
type backoff struct {
	min, max time.Duration
	rand     func() float64 // in [0, 1)
}

func newBackoff(lo, hi time.Duration, r func() float64) backoff {
	if lo <= 0 {
		lo = 100 * time.Millisecond
	}
	if hi <= 0 {
		hi = 10 * time.Second
	}
	hi = max(hi, lo)
	if r == nil {
		r = rand.Float64
	}
	return backoff{min: lo, max: hi, rand: r}
}

// delay is the wait after the n-th consecutive failure (n >= 1).
func (b backoff) delay(n int) time.Duration {
	if n < 1 {
		return 0
	}
	d := b.min
	for i := 1; i < n && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	half := d / 2
	return half + time.Duration(b.rand()*float64(d-half))
}

// retryAfter handles a failed send of a reporter loop: the next pass sends
// whatever it has (force), after the backoff of the failures so far. It
// reports false when ctx ended.
func retryAfter(ctx context.Context, failures *int, force *atomic.Bool, b backoff) bool {
	if ctx.Err() != nil {
		return false
	}
	*failures++
	force.Store(true)
	return sleep(ctx, b.delay(*failures))
}
