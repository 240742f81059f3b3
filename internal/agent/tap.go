package agent

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/tap"
	"github.com/flowplane/flowplane/internal/wire"
)

// Tapper is what the Agent needs of a node to run the Hub's live taps;
// *node.Node implements it. An Agent whose Node does not advertises no
// tap capability.
type Tapper interface {
	OpenTap(kind, id string, p tap.Params) (*node.TapSession, error)
}

var _ Tapper = (*node.Node)(nil)

// pollTaps long-polls the Hub for live taps and runs each until its
// duration passes or the Hub answers a push with 410 (nobody reads it).
// A Hub without the route (an older one) ends the loop.
func (a *Agent) pollTaps(ctx context.Context) {
	tp, ok := a.o.Node.(Tapper)
	if !ok {
		return
	}
	var running sync.WaitGroup
	defer running.Wait()
	path := "/agent/taps?wait_ms=" + strconv.FormatInt(a.o.PollWait.Milliseconds(), 10)
	failures := 0
	for {
		var page wire.Page[wire.TapRequest]
		err := a.c.call(ctx, http.MethodGet, path, nil, &page, a.o.PollWait)
		if ctx.Err() != nil {
			return
		}
		var se *statusError
		if errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusMethodNotAllowed) {
			a.log.Info("the Hub runs no live taps; not polling for them")
			return
		}
		if err != nil {
			failures++
			if !errors.Is(err, errNoSession) {
				a.log.Warn("tap poll failed", "err", err)
			}
			if !sleep(ctx, a.b.delay(failures)) {
				return
			}
			continue
		}
		failures = 0
		for _, req := range page.Items {
			running.Go(func() { a.runTap(ctx, tp, req) })
		}
	}
}

// runTap opens one tap on the node and pushes its samples in batches: an
// empty one at once (the tap runs), one per group of events the session
// flushes, the end last. A push that fails ends the tap: the Hub answers
// 410 once its operator left.
func (a *Agent) runTap(ctx context.Context, tp Tapper, req wire.TapRequest) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	path := "/agent/taps/" + url.PathEscape(req.TapID) + "/samples"
	push := func(b wire.TapBatch) error {
		if b.Messages == nil {
			b.Messages = []wire.TapMessage{}
		}
		return a.c.call(ctx, http.MethodPost, path, b, nil, 0)
	}
	p, perr := tapParams(req)
	var sess *node.TapSession
	if perr == nil {
		sess, perr = tp.OpenTap(req.Kind, req.ResourceID, p)
	}
	if perr != nil {
		_ = push(wire.TapBatch{Error: tapOpenProblem(perr)})
		return
	}
	defer sess.Close()
	if err := push(wire.TapBatch{}); err != nil {
		return
	}
	var batch wire.TapBatch
	var sent wire.TapCounts
	emit := func(event string, v any) error {
		switch event {
		case wire.TapEventMessage:
			batch.Messages = append(batch.Messages, v.(wire.TapMessage))
		case wire.TapEventEnd:
			e := v.(wire.TapEnd)
			batch.End = &e
		}
		return nil
	}
	flush := func() error {
		batch.TapCounts = sess.Counts()
		if len(batch.Messages) == 0 && batch.End == nil && batch.TapCounts == sent {
			return nil
		}
		sent = batch.TapCounts
		err := push(batch)
		batch = wire.TapBatch{}
		return err
	}
	if err := sess.Run(ctx, emit, flush); err != nil && ctx.Err() == nil {
		a.log.Debug("tap ended", "tap_id", req.TapID, "err", err)
	}
}

// tapParams checks a tap request within the node's own bounds: the Hub's
// word is not enough to sample faster or longer.
func tapParams(req wire.TapRequest) (tap.Params, error) {
	q := url.Values{"rate": {strconv.Itoa(req.Rate)}, "duration": {(time.Duration(req.DurationMS) * time.Millisecond).String()}}
	if req.Stage != "" {
		q.Set("stage", req.Stage)
	}
	if req.Operator != "" {
		q.Set("operator", req.Operator)
	}
	return tap.ParseParams(q, req.Kind == node.TapJob)
}

// tapOpenProblem is the problem the Hub answers its operator with.
func tapOpenProblem(err error) *wire.Problem {
	var pe *tap.ParamError
	switch {
	case errors.As(err, &pe):
		return &wire.Problem{Code: "invalid_query", Message: pe.Error()}
	case errors.Is(err, node.ErrStreamNotFound):
		return &wire.Problem{Code: "stream_not_found", Message: "no stream with that id on the node"}
	case errors.Is(err, node.ErrJobNotFound):
		return &wire.Problem{Code: "job_not_found", Message: "no job with that id on the node"}
	}
	return &wire.Problem{Code: "unavailable", Message: "the node could not open the tap"}
}
