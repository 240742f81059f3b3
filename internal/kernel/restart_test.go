package kernel

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/operator"
)

func TestRestarterDecides(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	type failure struct {
		atMs       int64 // since t0
		progressed bool
	}
	// step is the outcome of one failure: the pause in ms, or -1 when the
	// strategy gives up.
	tests := []struct {
		name     string
		rs       config.RestartStrategy
		failures []failure
		want     []int64
		reason   string
	}{
		{"none", config.RestartStrategy{Type: "none", DelayMs: 1000, MaxDelayMs: 1000},
			[]failure{{0, false}}, []int64{-1}, "restart strategy none"},
		{"fixed_delay: attempts, then fail", config.RestartStrategy{Type: "fixed_delay", DelayMs: 500, MaxDelayMs: 500, Attempts: 2},
			[]failure{{0, false}, {10, false}, {20, false}}, []int64{500, 500, -1}, "all 2 restarts (attempts) used"},
		{"fixed_delay: zero attempts", config.RestartStrategy{Type: "fixed_delay", Attempts: 0},
			[]failure{{0, false}}, []int64{-1}, "all 0 restarts"},
		{"doubling to the cap, reset by progress", config.RestartStrategy{Type: "fixed_delay", DelayMs: 1000, MaxDelayMs: 3000, Attempts: 10},
			[]failure{{0, false}, {1, false}, {2, false}, {3, false}, {4, true}, {5, false}},
			[]int64{1000, 2000, 3000, 3000, 1000, 2000}, ""},
		{"failure_rate: too many within the interval", config.RestartStrategy{Type: "failure_rate", DelayMs: 0, MaxDelayMs: 0, MaxFailuresPerInterval: 2, FailureRateIntervalMs: 1000},
			[]failure{{0, false}, {500, false}, {900, false}}, []int64{0, 0, -1}, "3 failures within 1000 ms, more than max_failures_per_interval (2)"},
		{"failure_rate: old failures leave the interval", config.RestartStrategy{Type: "failure_rate", DelayMs: 10, MaxDelayMs: 10, MaxFailuresPerInterval: 2, FailureRateIntervalMs: 1000},
			[]failure{{0, false}, {500, false}, {1000, false}, {1600, false}, {5000, false}, {5001, false}},
			[]int64{10, 10, 10, 10, 10, 10}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRestarter(&tt.rs)
			var got []int64
			reason := ""
			for _, f := range tt.failures {
				pause, giveUp := r.failed(t0.Add(time.Duration(f.atMs)*time.Millisecond), f.progressed)
				if giveUp != "" {
					got, reason = append(got, -1), giveUp
					break
				}
				got = append(got, pause.Milliseconds())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pauses (-want +got):\n%s", diff)
			}
			if !strings.Contains(reason, tt.reason) || (tt.reason == "") != (reason == "") {
				t.Errorf("reason %q, want one containing %q", reason, tt.reason)
			}
		})
	}
}

// alwaysFails fails on every record, as an expression that cannot be
// evaluated on the input does.
type alwaysFails struct{ baseOp }

func (alwaysFails) Process(context.Context, []operator.Record, operator.Collector) error {
	return errors.New("mapping: invalid operation: float64 % int")
}

// TestRestartStrategyEndsFailed: a job failing at every attempt restarts
// as its strategy allows, then ends Failed with the strategy's reason and
// the failure, which the observation shows with the restarts.
func TestRestartStrategyEndsFailed(t *testing.T) {
	tests := []struct {
		name     string
		rs       *config.RestartStrategy
		restarts int
		reason   string
	}{
		{"fixed_delay", &config.RestartStrategy{Type: "fixed_delay", Attempts: 2}, 2, "restart strategy fixed_delay: all 2 restarts"},
		{"failure_rate", &config.RestartStrategy{Type: "failure_rate", MaxFailuresPerInterval: 3, FailureRateIntervalMs: 3_600_000}, 3,
			"restart strategy failure_rate: 4 failures within 3600000 ms"},
		{"none", &config.RestartStrategy{Type: "none"}, 0, "restart strategy none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCountJob(t)
			p := c.plan(&seqHooks{}, 2)
			p.Restart = tt.rs
			ops := countOps()
			ops["count"] = func() operator.Operator { return alwaysFails{} }
			opts := testOptions(ops)
			log := &stateLog{}
			opts.OnState = log.add
			j, err := Build("jobs[0]", p, opts)
			if err != nil {
				t.Fatal(err)
			}
			wait, _ := runJob(t, j)
			err = wait()
			if err == nil || !strings.Contains(err.Error(), tt.reason) || !strings.Contains(err.Error(), "float64 % int") {
				t.Fatalf("Run = %v, want %q and the failure", err, tt.reason)
			}
			o := j.Observe()
			if o.State != Failed || o.Restarts != tt.restarts || o.Error != err.Error() || !strings.Contains(o.LastError, "float64 % int") {
				t.Errorf("observation: state %s, restarts %d, error %q, last error %q; want failed after %d restarts",
					o.State, o.Restarts, o.Error, o.LastError, tt.restarts)
			}
			states := log.get()
			if n := countOf(states, Recovering); n != tt.restarts || states[len(states)-1] != Failed {
				t.Errorf("states %v, want %d recoveries, then failed", states, tt.restarts)
			}
		})
	}
}

func countOf(states []State, s State) int {
	n := 0
	for _, x := range states {
		if x == s {
			n++
		}
	}
	return n
}

// TestLastErrorKeptAfterRecovery: a job that recovered from a failure runs
// on with no current error, and the observation keeps the failure as
// last_error.
func TestLastErrorKeptAfterRecovery(t *testing.T) {
	j, _, log := failingJob(t, RecoverLatestCheckpoint)
	wait, _ := runJob(t, j)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	o := j.Observe()
	if o.State != Completed || o.Error != "" || !strings.Contains(o.LastError, "injected failure") || o.Restarts != 1 {
		t.Errorf("observation %+v, want completed with last_error the injected failure", o)
	}
	if !slices.Contains(log.get(), Recovering) {
		t.Error("never recovering")
	}
}
