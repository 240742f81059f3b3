package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/tap"
)

// tapBuffer is the number of samples a tap holds for its reader: enough
// for a reader that keeps up, small enough that a slow one costs little.
const tapBuffer = tap.DefaultBuffer

// TapStream attaches a tap to stream id after p.Stage (after the last
// processor when empty) at p.Rate messages a second, and returns it with
// the function that detaches it. The tap stays attached across restarts
// of the stream and sees nothing while it does not run. Errors:
// ErrStreamNotFound, a *tap.ParamError for a stage the stream lacks.
func (e *Engine) TapStream(id string, p tap.Params, now func() time.Time) (*tap.Tap, func(), error) {
	e.mu.Lock()
	in := e.streams[id]
	e.mu.Unlock()
	if in == nil {
		return nil, nil, fmt.Errorf("%w: %q", ErrStreamNotFound, id)
	}
	point, err := tap.StreamPoint(p.Stage, len(in.conf.Pipeline.Processors))
	if err != nil {
		return nil, nil, err
	}
	t := tap.New(point, p.Rate, tapBuffer, now)
	return t, in.taps.Attach(t), nil
}

// TapJob attaches a tap to job id after operator p.Operator (the job's
// first sink, taking what it is given, when empty) as TapStream does. Only
// the job's tasks on this node are sampled. Errors: ErrJobNotFound, a
// *tap.ParamError for an operator the job lacks, a plan's build problems.
func (e *Engine) TapJob(id string, p tap.Params, now func() time.Time) (*tap.Tap, func(), error) {
	plan, err := e.JobPlan(id)
	if err != nil {
		return nil, nil, err
	}
	e.mu.Lock()
	ji := e.jobs[id]
	e.mu.Unlock()
	if ji == nil {
		return nil, nil, fmt.Errorf("%w: %q", ErrJobNotFound, id)
	}
	ids := make([]string, 0, len(plan.Operators))
	point := p.Operator
	for _, op := range plan.Operators {
		ids = append(ids, op.ID)
		if point == "" && op.Kind == "sink" {
			point = op.ID
		}
	}
	if !slices.Contains(ids, point) {
		return nil, nil, &tap.ParamError{Param: "operator", Reason: "must be one of the job's operators: " + strings.Join(ids, ", ")}
	}
	t := tap.New(point, p.Rate, tapBuffer, now)
	return t, ji.taps.Attach(t), nil
}
