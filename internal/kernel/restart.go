package kernel

import (
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/config"
)

// restarter applies a job's restart strategy: after each failure it says
// whether the job restarts and after how long. Its state is owned by the
// goroutine running Run.
type restarter struct {
	rs       config.RestartStrategy
	failures []time.Time // failure_rate: failures within the interval, oldest first
	restarts int         // restarts granted so far
	delay    time.Duration
}

func newRestarter(rs *config.RestartStrategy) *restarter {
	if rs == nil {
		rs = config.DefaultRestartStrategy()
	}
	return &restarter{rs: *rs, delay: time.Duration(rs.DelayMs) * time.Millisecond}
}

// failed records a failure at now (the job's clock). progressed says the
// failed attempt completed a checkpoint, which resets the delay. It returns
// the pause before the restart, or a non-empty reason the strategy gives
// up.
func (r *restarter) failed(now time.Time, progressed bool) (pause time.Duration, giveUp string) {
	rs := r.rs
	switch rs.Type {
	case "none":
		return 0, "restart strategy none restarts no failed job"
	case "fixed_delay":
		if r.restarts >= rs.Attempts {
			return 0, fmt.Sprintf("restart strategy fixed_delay: all %d restarts (attempts) used", rs.Attempts)
		}
	default: // failure_rate
		window := time.Duration(rs.FailureRateIntervalMs) * time.Millisecond
		kept := r.failures[:0]
		for _, f := range r.failures {
			if now.Sub(f) < window {
				kept = append(kept, f)
			}
		}
		r.failures = append(kept, now)
		if len(r.failures) > rs.MaxFailuresPerInterval {
			return 0, fmt.Sprintf("restart strategy failure_rate: %d failures within %d ms, more than max_failures_per_interval (%d)",
				len(r.failures), rs.FailureRateIntervalMs, rs.MaxFailuresPerInterval)
		}
	}
	r.restarts++
	if progressed {
		r.delay = time.Duration(rs.DelayMs) * time.Millisecond
	}
	pause = r.delay
	r.delay = min(r.delay*2, time.Duration(rs.MaxDelayMs)*time.Millisecond)
	return pause, ""
}
