package agent

import (
	"context"
	"sync/atomic"
	"time"
)

// pacer is what the reporter and the job reporter share: when to send. A
// send is tried at once, soon after a change (a signal on the changes
// channel, then the debounce to let a burst settle), at once when woken
// urgently (a command finished, and the Hub waits for its report to
// converge), and every period; a send that failed is retried after
// backoff, forced.
type pacer struct {
	debounce time.Duration
	period   time.Duration
	backoff  backoff

	urgentc chan struct{} // buffered(1)
	force   atomic.Bool
}

func newPacer(debounce, period time.Duration, b backoff) pacer {
	return pacer{debounce: debounce, period: period, backoff: b, urgentc: make(chan struct{}, 1)}
}

// wakeNow asks for a send of a change without the debounce.
func (p *pacer) wakeNow() {
	select {
	case p.urgentc <- struct{}{}:
	default:
	}
}

// run calls try on every wake-up until ctx ends. try builds what it would
// send and asks due, with whether that changed since its last send,
// whether to send it: due when forced, changed, or the period passed
// since the last send. try reports whether it sent; a failed send is
// retried.
func (p *pacer) run(ctx context.Context, changes <-chan struct{}, try func(ctx context.Context, due func(changed bool) bool) (sent bool, err error)) {
	lastSent := time.Time{}
	failures := 0
	periodic := time.NewTimer(0)
	defer periodic.Stop()
	due := func(changed bool) bool {
		return p.force.Swap(false) || changed || time.Since(lastSent) >= p.period
	}
	for {
		sent, err := try(ctx, due)
		if err != nil {
			if !retryAfter(ctx, &failures, &p.force, p.backoff) {
				return
			}
			continue
		}
		if sent {
			failures = 0
			lastSent = time.Now()
			periodic.Reset(p.period)
		}
		select {
		case <-ctx.Done():
			return
		case <-periodic.C:
			periodic.Reset(p.period)
		case <-p.urgentc:
		case <-changes:
			t := time.NewTimer(p.debounce)
			select {
			case <-t.C:
			case <-p.urgentc:
				t.Stop()
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
	}
}
