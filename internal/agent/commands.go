package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/policy"
	"github.com/flowplane/flowplane/internal/wire"
)

// Failure classes and codes of command results.
const (
	classPermanent = "permanent"

	codeUnsupported      = "unsupported_operation"
	codeStreamNotFound   = "stream_not_found"
	codeConfigVersion    = "config_version_unavailable"
	codeInvalidPayload   = "invalid_payload"
	codeCancelledLocally = "cancelled"
)

// actor is the actor of the node operations the Agent runs for the Hub.
const actor = "hub"

// executor carries out commands as node operations. It owns the in-flight
// set; the outcome cache lives in the store.
type executor struct {
	node Node
	st   *store
	now  func() time.Time
	log  *slog.Logger
	post func(ctx context.Context, commandID string, res wire.CommandResult)
	wake func() // a stream's desire changed: report
	// epochs is the highest leader epoch seen; older commands are refused.
	epochs *epochs
	tasks  sync.WaitGroup

	mu       sync.Mutex          // guards inflight and the ledgers' unposted, and orders cache lookups against records
	inflight map[string][]string // command id -> attempt ids awaiting its outcome
	// The Hub desires of streams and of Hub jobs.
	streamLedger ledger[Desire]
	jobLedger    ledger[JobDesire]
	// Job control (jobs.go); jobs is nil without an engine. jobTail,
	// triggers, taking and takes are guarded by mu.
	jobs     *jobControl
	nodeID   string
	policy   *policy.Policy           // the node's remote policy; nil checks nothing
	jobTail  map[string]chan struct{} // job id -> closed when its last queued command ended
	triggers map[string]taken         // "<job id>/<artifact id>" -> what took it, for artifacts taken by commands
	taking   map[string]int           // job id -> artifact commands (checkpoint, savepoint, stop with savepoint) until their outcome is posted
	takes    uint64                   // artifact commands ever started: a report that listed artifacts learns whether one started meanwhile

	// Configuration commands (configuration.go), guarded by mu:
	// configTail is closed when the last queued one ended; heldConfig,
	// while an apply runs and until its outcome is posted, is the
	// configuration reports keep showing.
	configTail chan struct{}
	heldConfig *wire.ReportConfiguration
}

// ledger is how the executor keeps one kind of Hub desire: a stream's
// (Desire) or a Hub job's (JobDesire).
type ledger[D any] struct {
	table desireTable[D] // the recorded desires
	// unposted holds, by resource id, the desire reports keep showing
	// while a newer one is recorded but its command's outcome is still
	// being posted: the Hub learns a command succeeded before a report
	// shows it applied, so command_succeeded precedes the in_sync it
	// causes. Guarded by the executor's mu.
	unposted map[string]*held[D]
	// wake, when set, asks for a report once an outcome was posted: every
	// outcome with wakeAlways (a job's artifact command changes no desire
	// but lets observations show its artifact), else only one that changed
	// a desire.
	wake       func()
	wakeAlways bool
	// unwritten is logged when a record could not be written; what and
	// idKey name the command and its resource in answer's log.
	unwritten, what, idKey string
}

// held is the desire a resource is reported with while n recorded
// commands on it have outcomes not yet posted; had is false when the
// resource had no desire before.
type held[D any] struct {
	prev D
	had  bool
	n    int
}

// shown returns every desire as reports show it: the recorded one, or for
// a resource whose command outcome is still being posted, the one before
// it.
func (l *ledger[D]) shown(x *executor) map[string]D {
	x.mu.Lock()
	defer x.mu.Unlock()
	return l.shownLocked()
}

func (l *ledger[D]) shownLocked() map[string]D {
	ds := l.table.all()
	for id, h := range l.unposted {
		if h.had {
			ds[id] = h.prev
		} else {
			delete(ds, id)
		}
	}
	return ds
}

// finish records a command's outcome (and the resource's new desire, when
// it changed), then, once the acknowledgement was answered (acked closed;
// nil: none was sent), answers every delivery attempt waiting for it, and
// only then lets reports show the new desire and wakes the reporter. The
// record's fsync overlaps the acknowledgement's round trip. release, when
// not nil, is called under mu as the new desire is shown: what it lets
// reports show (a job command's artifact) appears in the same report as
// the desire, never in one still at the desire before.
func (l *ledger[D]) finish(ctx context.Context, x *executor, cmd wire.Command, out Outcome, d *D, acked <-chan struct{}, release func()) {
	id := cmd.ResourceID
	x.mu.Lock()
	if d != nil {
		h := l.unposted[id]
		if h == nil {
			h = &held[D]{}
			h.prev, h.had = l.table.get(id)
			l.unposted[id] = h
		}
		h.n++
	}
	if err := l.table.record(out, id, d); err != nil {
		x.log.Error(l.unwritten, "err", err)
	}
	atts := x.inflight[cmd.CommandID]
	delete(x.inflight, cmd.CommandID)
	x.mu.Unlock()
	if acked != nil {
		<-acked // the outcome follows the acknowledgement
	}
	defer func() {
		if d != nil || release != nil {
			x.mu.Lock()
			if h := l.unposted[id]; d != nil && h != nil {
				if h.n--; h.n <= 0 {
					delete(l.unposted, id)
				}
			}
			if release != nil {
				release()
			}
			x.mu.Unlock()
		}
		if l.wake != nil && (d != nil || l.wakeAlways) {
			l.wake()
		}
	}()
	x.answer(ctx, cmd, out, atts, l.what, l.idKey)
}

// desires returns every stream's desire as reports show it.
func (x *executor) desires() map[string]Desire { return x.streamLedger.shown(x) }

// handle takes one delivered command. It is called in delivery order by
// one goroutine: the node operation is queued before handle returns, so
// commands for one stream run in the order the Hub sent them; waiting for
// them and posting results happens in the background.
func (x *executor) handle(ctx context.Context, cmd wire.Command) {
	x.mu.Lock()
	if out, ok := x.st.outcome(cmd.CommandID); ok {
		x.mu.Unlock()
		x.log.Debug("command redelivered; answering its recorded outcome", "command_id", cmd.CommandID, "state", out.State)
		x.background(func() { x.post(ctx, cmd.CommandID, out.result(cmd.AttemptID)) })
		return
	}
	if atts, ok := x.inflight[cmd.CommandID]; ok {
		// Redelivered while it runs: this attempt gets the outcome too,
		// once (two Hubs may hand out the same attempt).
		if !slices.Contains(atts, cmd.AttemptID) {
			x.inflight[cmd.CommandID] = append(atts, cmd.AttemptID)
		}
		x.mu.Unlock()
		return
	}
	if ok, seen := x.epochs.admit(cmd.Epoch); !ok {
		x.mu.Unlock()
		// Not recorded as the command's outcome: the leader may send the
		// same command again, at its epoch, and then it runs.
		x.log.Warn("command of a deposed Hub leader refused; not run", "command_id", cmd.CommandID, "operation", cmd.Operation,
			"epoch", cmd.Epoch, "seen_epoch", seen)
		res := wire.CommandResult{AttemptID: cmd.AttemptID, State: wire.ResultFailed, Failure: &wire.Failure{Class: classPermanent, Code: wire.FailureStaleEpoch,
			Message: fmt.Sprintf("the command is of leader epoch %d, older than epoch %d this Agent has seen: a deposed Hub leader sent it; not run", cmd.Epoch, seen)}}
		x.background(func() { x.post(ctx, cmd.CommandID, res) })
		return
	}
	x.inflight[cmd.CommandID] = []string{cmd.AttemptID}
	x.mu.Unlock()

	if !cmd.ExpiresAt.IsZero() && !x.now().Before(cmd.ExpiresAt.Time) {
		x.log.Warn("command expired before it was received; not run", "command_id", cmd.CommandID, "operation", cmd.Operation, "expires_at", cmd.ExpiresAt.Time)
		x.background(func() {
			x.streamLedger.finish(ctx, x, cmd, Outcome{CommandID: cmd.CommandID, State: wire.ResultTimedOut}, nil, nil, nil)
		})
		return
	}
	acked := make(chan struct{})
	x.background(func() {
		defer close(acked)
		x.post(ctx, cmd.CommandID, wire.CommandResult{AttemptID: cmd.AttemptID, State: wire.ResultAcknowledged})
	})
	if f := x.switchedOff(cmd.Operation); f != nil {
		out := Outcome{CommandID: cmd.CommandID, State: wire.ResultFailed, Failure: f}
		x.background(func() {
			if isJobCommand(cmd.Operation) {
				x.jobLedger.finish(ctx, x, cmd, out, nil, acked, nil)
			} else {
				x.streamLedger.finish(ctx, x, cmd, out, nil, acked, nil)
			}
		})
		return
	}
	if isJobCommand(cmd.Operation) {
		x.queueJob(ctx, cmd, acked)
		return
	}
	if isConfigCommand(cmd.Operation) {
		x.queueConfig(ctx, cmd, acked)
		return
	}
	opID, desire, fail := x.submit(cmd)
	x.background(func() {
		out := Outcome{CommandID: cmd.CommandID, State: wire.ResultFailed, Failure: fail}
		if fail == nil {
			rec, err := x.node.WaitOperation(ctx, opID)
			if err != nil {
				return // shutting down: not recorded, a redelivery runs it again
			}
			switch rec.State {
			case wire.OpSucceeded:
				out = Outcome{CommandID: cmd.CommandID, State: wire.ResultSucceeded}
			case wire.OpCancelled:
				out.Failure = &wire.Failure{Class: classPermanent, Code: codeCancelledLocally, Message: "the node operation was cancelled through the Node API before it ran"}
				desire = nil
			default:
				out.Failure = rec.Failure
				desire = nil
			}
		}
		x.streamLedger.finish(ctx, x, cmd, out, desire, acked, nil)
	})
}

// switchedOff is the failure of a command whose capability the node's
// remote policy switched off (nil when it may run): it fails before
// anything runs.
func (x *executor) switchedOff(op string) *wire.Failure {
	if x.policy == nil {
		return nil
	}
	switch {
	case isJobCommand(op) && !x.policy.JobControl():
		return permanentFailure(codeIncompatibleCapability, "this node does not take job commands from the Hub (%s is false); %s is not advertised", policy.RuleJobControl, wire.CapabilityJobControl)
	case isConfigCommand(op) && !x.policy.ConfigControl():
		return permanentFailure(codeIncompatibleCapability, "this node does not take configuration commands from the Hub (%s is false); %s is not advertised", policy.RuleConfigControl, wire.CapabilityConfigControl)
	}
	return nil
}

// submit checks a command and queues its node operation. It returns the
// operation id and the desire to record once it succeeded, or a failure.
func (x *executor) submit(cmd wire.Command) (string, *Desire, *wire.Failure) {
	permanent := func(code, format string, args ...any) (string, *Desire, *wire.Failure) {
		return "", nil, &wire.Failure{Class: classPermanent, Code: code, Message: fmt.Sprintf(format, args...)}
	}
	var action string
	d := Desire{Generation: cmd.Generation, ConfigVersion: cmd.ConfigVersion, ActionID: cmd.ActionID, CommandID: cmd.CommandID}
	switch cmd.Operation {
	case wire.CommandStreamDesiredState:
		switch cmd.Payload.State {
		case node.DesiredRunning:
			action = node.OpStart
		case node.DesiredStopped:
			action = node.OpStop
		default:
			return permanent(codeInvalidPayload, "payload state %q is neither running nor stopped", cmd.Payload.State)
		}
		d.State = cmd.Payload.State
	case wire.CommandStreamRestart:
		action, d.State = node.OpRestart, node.DesiredRunning
	default:
		return permanent(codeUnsupported, "this Agent does not execute %q commands", cmd.Operation)
	}
	applied := x.node.ConfigVersion()
	if cmd.ConfigVersion != "" && cmd.ConfigVersion != applied && cmd.ConfigVersion != x.currentConfiguration().HubVersion {
		// Stream commands do not change the configuration: the Hub applies
		// a version with configuration_apply first.
		return permanent(codeConfigVersion, "configuration version %s is not the version this node runs (%s); apply it with configuration_apply first", cmd.ConfigVersion, applied)
	}
	if d.ConfigVersion == "" {
		d.ConfigVersion = applied
	}
	rec, _, err := x.node.StreamAction(cmd.ResourceID, action, node.Request{Actor: actor, CorrelationID: cmd.CommandID, ActionID: cmd.ActionID,
		HubGeneration: cmd.Generation})
	switch {
	case errors.Is(err, node.ErrStreamNotFound):
		return permanent(codeStreamNotFound, "no stream %q on this node", cmd.ResourceID)
	case err != nil:
		return "", nil, &wire.Failure{Class: "internal", Code: "internal", Message: err.Error()}
	}
	return rec.OperationID, &d, nil
}

// answer logs a command's outcome ("command executed", or with what
// prefixed, "job command executed") and posts it to every delivery attempt
// waiting for it; idKey names the resource id in the log.
func (x *executor) answer(ctx context.Context, cmd wire.Command, out Outcome, atts []string, what, idKey string) {
	attrs := []any{"command_id", cmd.CommandID, "operation", cmd.Operation, idKey, cmd.ResourceID, "generation", cmd.Generation, "state", out.State}
	if out.Failure != nil {
		x.log.Warn(what+"command did not succeed", append(attrs, "code", out.Failure.Code, "message", out.Failure.Message)...)
	} else {
		x.log.Info(what+"command executed", attrs...)
	}
	for _, a := range atts {
		x.post(ctx, cmd.CommandID, out.result(a))
	}
}

func (x *executor) background(f func()) {
	x.tasks.Add(1)
	go func() {
		defer x.tasks.Done()
		f()
	}()
}

// postResult sends one command result, retrying on failure with backoff a
// bounded number of times: a result that never arrives is made good by
// the Hub's redelivery, answered from the outcome cache. 409 (that attempt
// is finished) and 404 (unknown command) end it.
func postResult(ctx context.Context, c *client, b backoff, log *slog.Logger, commandID string, res wire.CommandResult) {
	const attempts = 8
	for i := 1; ; i++ {
		err := c.call(ctx, http.MethodPost, "/agent/commands/"+url.PathEscape(commandID)+"/result", res, nil, 0)
		var se *statusError
		switch {
		case err == nil:
			return
		case errors.As(err, &se) && se.Status == http.StatusConflict:
			log.Debug("command attempt already finished at the Hub", "command_id", commandID, "attempt_id", res.AttemptID)
			return
		case errors.As(err, &se) && se.Status == http.StatusNotFound:
			log.Warn("the Hub does not know the command; dropping its result", "command_id", commandID)
			return
		case ctx.Err() != nil:
			return
		case i == attempts:
			log.Warn("command result not delivered; the Hub will redeliver the command", "command_id", commandID, "state", res.State, "err", err)
			return
		}
		if !sleep(ctx, b.delay(i)) {
			return
		}
	}
}

// sleep waits d or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
