package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// errTimedOut is the cause of a wait's context when --timeout passed.
var errTimedOut = errors.New("timed out")

// recheck is how often a wait reads the views again besides the events:
// the views are the truth, events only make the wait prompt.
const recheck = 2 * time.Second

// written is what a write returns: the target to wait for and what to
// print when not waiting (or once the wait succeeded).
type written struct {
	target Target
	out    func() error // prints the write's answer; nil prints nothing
}

// write runs w; with --wait it subscribes to the event stream first (so
// nothing the write causes is missed), then follows the target until the
// verdict or the timeout.
func (a *app) write(ctx context.Context, w func(context.Context, *Client) (written, error)) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	if !a.wait {
		res, err := w(ctx, c)
		if err != nil {
			return err
		}
		if res.out != nil {
			return res.out()
		}
		return nil
	}
	ctx, cancel := context.WithTimeoutCause(ctx, a.timeout, errTimedOut)
	defer cancel()
	sub, err := c.subscribe(ctx, nil, live)
	if err != nil {
		return a.timedOut(ctx, err)
	}
	defer sub.close()
	res, err := w(ctx, c)
	if err != nil {
		return a.timedOut(ctx, err)
	}
	if res.out != nil {
		if err := res.out(); err != nil {
			return err
		}
	}
	if res.target.Kind == "" {
		return nil // nothing to wait for (a synchronous write)
	}
	return a.follow(ctx, c, sub, res.target)
}

// follow waits for t on sub, printing the states it went through to stderr.
func (a *app) follow(ctx context.Context, c *Client, sub *eventStream, t Target) error {
	start := time.Now()
	var o Observation
	var p progress
	if t.Kind != waitRollout && t.Kind != waitOperation {
		p.note(wire.ConvergencePending) // what a write is at first
	}
	line := func() string {
		return fmt.Sprintf("%s: %s (%.1fs)", t.label(), p.String(), time.Since(start).Seconds())
	}
	live := isTerminal(a.env.Stderr)
	// show rewrites the progress line in place on a terminal.
	show := func() {
		if live {
			fmt.Fprintf(a.env.Stderr, "\r%s\x1b[K", line())
		}
	}
	check := func() (Verdict, string, error) {
		v, err := observe(ctx, c, t)
		if err != nil {
			return Waiting, "", err
		}
		o = v
		p.note(t.state(o))
		verdict, why := Decide(t, o)
		return verdict, why, nil
	}
	verdict, why, err := check()
	tick := time.NewTicker(recheck)
	defer tick.Stop()
	for err == nil && verdict == Waiting {
		select {
		case ev := <-sub.events:
			if !o.Apply(t, ev) {
				continue
			}
			if ev.Kind == kindResync || t.Kind == waitRollout {
				// A rollout's view has its waves and each node's phase.
				verdict, why, err = check()
				show()
				continue
			}
			if p.note(t.state(o)) {
				show()
			}
			verdict, why = Decide(t, o)
			if verdict == Succeeded && t.Kind != waitRollout {
				// Confirm with the view: an event may trail or lead it.
				verdict, why, err = check()
			}
		case err = <-sub.errc:
		case <-tick.C:
			verdict, why, err = check()
			show()
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		if context.Cause(ctx) == errTimedOut {
			// One last look, past the deadline, so the message says where
			// it stands now.
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if v, err := observe(lctx, c, t); err == nil {
				o = v
				p.note(t.state(o))
			}
			cancel()
			fmt.Fprintf(a.env.Stderr, "%s%s\n", clearLine(live), line())
			last := orDash(t.state(o))
			if o.Reason != "" && last == o.Convergence {
				last = withReason(last, o.Reason)
			}
			return &exitError{code: ExitTimedOut, err: fmt.Errorf("%s: not done after %s (last: %s)", t.label(), a.timeout, joinNonEmpty(last, o.Failure))}
		}
		return err
	}
	fmt.Fprintf(a.env.Stderr, "%s%s\n", clearLine(live), line())
	if verdict == Failed {
		return &exitError{code: ExitFailed, err: fmt.Errorf("%s failed: %s", t.label(), why)}
	}
	return nil
}

// timedOut turns an error that the timeout caused into exit 3.
func (a *app) timedOut(ctx context.Context, err error) error {
	if context.Cause(ctx) == errTimedOut {
		return &exitError{code: ExitTimedOut, err: fmt.Errorf("timed out after %s: %w", a.timeout, err)}
	}
	return err
}

// observe reads t's views.
func observe(ctx context.Context, c *Client, t Target) (Observation, error) {
	var o Observation
	if t.OperationID != "" {
		var op wire.Operation
		if err := c.get(ctx, "/operations/"+pathEsc(t.OperationID), nil, &op); err != nil {
			return o, err
		}
		o.OpState = op.State
		if op.Failure != nil {
			o.Failure = joinNonEmpty(op.Failure.Code, op.Failure.Message)
		}
	}
	switch t.Kind {
	case waitStream:
		var s wire.Stream
		if err := c.get(ctx, "/nodes/"+pathEsc(t.NodeID)+"/streams/"+pathEsc(t.ResourceID), nil, &s); err != nil {
			return o, err
		}
		o.Convergence, o.Generation = s.Convergence, s.Desired.Generation
		if s.Observed.State == "failed" {
			o.Reason = "observed_failed"
			o.Failure = joinNonEmpty(o.Failure, s.Observed.LastError)
		}
	case waitJob:
		var j wire.Job
		if err := c.get(ctx, "/jobs/"+pathEsc(t.ResourceID), nil, &j); err != nil {
			return o, err
		}
		o.Convergence, o.Reason, o.Generation = j.Convergence, j.ConvergenceReason, j.Desired.Generation
		if j.Observed.LastError != "" && o.Failure == "" {
			o.Failure = j.Observed.LastError
		}
	case waitConfiguration:
		var nc wire.NodeConfiguration
		if err := c.get(ctx, "/nodes/"+pathEsc(t.NodeID)+"/configuration", nil, &nc); err != nil {
			return o, err
		}
		o.Convergence, o.Reason = nc.Convergence, nc.ConvergenceReason
		if nc.Desired != nil {
			o.Generation = nc.Desired.Generation
		}
	case waitRollout:
		var r wire.Rollout
		if err := c.get(ctx, "/rollouts/"+pathEsc(t.ResourceID), nil, &r); err != nil {
			return o, err
		}
		o.Rollout = r.State
		if r.CurrentWave > 0 {
			o.Wave = fmt.Sprintf("%d/%d", r.CurrentWave, len(r.Waves))
		}
		if r.Failure != nil {
			o.Failure = joinNonEmpty(r.Failure.Code, r.Failure.Message)
		}
		for _, n := range r.Nodes {
			if n.Failure != nil && o.Failure == "" {
				o.Failure = joinNonEmpty(n.NodeID, n.Failure.Code, n.Failure.Message)
			}
		}
	}
	return o, nil
}

// isTerminal says whether w is a terminal, where progress is shown live.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// clearLine returns to the start of a live progress line and clears it.
func clearLine(live bool) string {
	if live {
		return "\r\x1b[K"
	}
	return ""
}
