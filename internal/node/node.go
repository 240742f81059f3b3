package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/policy"
	"github.com/flowplane/flowplane/internal/wire"
)

// EventSink receives the node's events; the event log implements it.
type EventSink interface {
	Append(ev wire.Event) wire.Event
}

// Options are a Node's dependencies. Now and NewID default to the clock and
// UUIDv7.
type Options struct {
	Engine   *engine.Engine
	Registry *component.Registry
	Events   EventSink
	Logger   *slog.Logger
	Now      func() time.Time
	NewID    func() string
	NodeID   string
	BootID   string
	Version  string
	// Secrets scrubs secret values from every error, last_error, event
	// and operation the node shows; the node adds the values of each
	// configuration it runs. The process logger shares it. nil: the node
	// makes its own.
	Secrets *config.Redactor
	// Policy restricts the configurations the Hub delivers (ValidateHub,
	// ApplyHub, and ReapplyVersion of a version the Hub gave); nil checks
	// nothing (a node embedded in tests). A node process always sets one.
	Policy *policy.Policy
}

// Errors the API maps to problems.
var (
	ErrStreamNotFound     = errors.New("stream not found")
	ErrGenerationConflict = errors.New("generation conflict")
)

// GenerationConflictError carries the generations of a failed If-Match.
type GenerationConflictError struct {
	Expected, Current int64
}

func (e *GenerationConflictError) Error() string {
	return fmt.Sprintf("generation %d is not the current generation %d", e.Expected, e.Current)
}

func (e *GenerationConflictError) Unwrap() error { return ErrGenerationConflict }

// Node is the node-local control plane over one engine.
type Node struct {
	opts    Options
	log     *slog.Logger
	ops     *operations
	started time.Time

	masked maskCache // served configuration texts

	mu         sync.Mutex // guards the fields below
	desired    map[string]*desired
	applied    map[string]applied
	order      []string // stream ids in configuration order
	cfgVersion string
	conf       configState
}

// New returns a node whose streams are those of cfg, applied as version
// cfgVersion (the engine already runs them).
func New(opts Options, cfg *config.Config, cfgVersion string) *Node {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewID == nil {
		opts.NewID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Secrets == nil {
		opts.Secrets = config.NewRedactor()
	}
	opts.Secrets.Merge(cfg.Redactor())
	n := &Node{opts: opts, log: opts.Logger, started: opts.Now(), desired: map[string]*desired{}, applied: map[string]applied{}}
	n.ops = newOperations(opts.Now, n.operationDone)
	n.setConfigLocked(cfg, cfgVersion, nil)
	return n
}

// setConfigLocked makes cfg the desired configuration: every stream desired
// running at version v. Streams whose configuration changed (or that are
// new) get a new generation; changed reports which, nil meaning all.
func (n *Node) setConfigLocked(cfg *config.Config, v string, changed map[string]bool) {
	n.cfgVersion = v
	next := map[string]*desired{}
	n.order = n.order[:0]
	for _, s := range cfg.Streams {
		n.order = append(n.order, s.ID)
		d, ok := n.desired[s.ID]
		switch {
		case !ok:
			d = &desired{State: DesiredRunning, Generation: 1, Target: 1, Authority: AuthorityNode}
		case changed == nil || changed[s.ID]:
			d.Generation++
			d.Target = d.Generation
			d.State, d.ActionID, d.Authority = DesiredRunning, "", AuthorityNode
		}
		d.ConfigVersion = v
		next[s.ID] = d
		// The engine applied it as part of the configuration.
		n.applied[s.ID] = applied{Generation: d.Target, ConfigVersion: v, ActionID: d.ActionID}
	}
	for id := range n.applied {
		if next[id] == nil {
			delete(n.applied, id)
		}
	}
	n.desired = next
}

// ID is the node's identity.
func (n *Node) ID() string { return n.opts.NodeID }

// event appends ev to the event log, scrubbed of secret values.
func (n *Node) event(ev wire.Event) {
	if n.opts.Events == nil {
		return
	}
	ev.NodeID = n.opts.NodeID
	ev.Message = n.redact(ev.Message)
	for k, v := range ev.Data {
		if s, ok := v.(string); ok {
			ev.Data[k] = n.redact(s)
		}
	}
	n.opts.Events.Append(ev)
}

// OnStreamState is the engine's state hook: it records a
// stream_state_changed event.
func (n *Node) OnStreamState(id string, st engine.StreamState) {
	n.event(wire.Event{Kind: wire.EventStreamStateChanged, ResourceID: id, Message: "stream " + string(st), Data: map[string]any{"state": string(st)}})
}

// operationDone records the event of a finished operation.
func (n *Node) operationDone(rec wire.Operation) {
	kind, outcome := wire.EventCommandSucceeded, "succeeded"
	msg := rec.Operation + " succeeded"
	if rec.State == wire.OpFailed {
		kind, outcome = wire.EventCommandFailed, "failed"
		msg = rec.Operation + " failed: " + rec.Failure.Message
	}
	n.event(wire.Event{Kind: kind, ResourceID: rec.ResourceID, OperationID: rec.OperationID, CorrelationID: rec.CorrelationID, Actor: rec.Actor, Outcome: outcome, Message: msg, Data: map[string]any{"operation": rec.Operation, "generation": rec.Generation}})
}

// Request carries the metadata of the API request behind an operation.
type Request struct {
	Actor         string
	CorrelationID string
	// IfMatch is the expected generation; nil means no precondition.
	IfMatch *int64
	// ActionID is the action id of a restart, when the caller has one (the
	// Hub's, for a restart the Agent carries out); empty means a new one.
	ActionID string
	// HubGeneration, when positive, is the Hub's generation of the command
	// the Agent carries out: the write takes it as the stream's generation
	// (authority hub) instead of counting one more, so that the node shows
	// the same generation as the Hub.
	HubGeneration int64
}

// StreamAction records a node-local desired-state write (start, stop) or
// one-shot command (restart) and queues it behind the stream's earlier
// operations. It returns the accepted operation and the new desired view.
func (n *Node) StreamAction(id, action string, req Request) (wire.Operation, wire.StreamDesired, error) {
	n.mu.Lock()
	d, ok := n.desired[id]
	if !ok {
		n.mu.Unlock()
		return wire.Operation{}, wire.StreamDesired{}, fmt.Errorf("%w: %q", ErrStreamNotFound, id)
	}
	if req.IfMatch != nil && *req.IfMatch != d.Generation {
		cur := d.Generation
		n.mu.Unlock()
		return wire.Operation{}, wire.StreamDesired{}, &GenerationConflictError{Expected: *req.IfMatch, Current: cur}
	}
	prev := *d
	if req.HubGeneration > 0 {
		d.Generation, d.Authority = req.HubGeneration, AuthorityHub
	} else {
		d.Generation, d.Authority = d.Generation+1, AuthorityNode
	}
	d.Target = d.Generation
	switch action {
	case OpStart:
		d.State = DesiredRunning
	case OpStop:
		d.State = DesiredStopped
	case OpRestart:
		d.State, d.ActionID = DesiredRunning, req.ActionID
		if d.ActionID == "" {
			d.ActionID = n.opts.NewID()
		}
	default:
		n.mu.Unlock()
		return wire.Operation{}, wire.StreamDesired{}, fmt.Errorf("unknown stream action %q", action)
	}
	want := *d
	view := desiredView(d)
	n.mu.Unlock()

	opID := n.opts.NewID()
	o := &op{
		rec: wire.Operation{
			OperationID: opID, IntentID: opID, Operation: action, NodeID: n.opts.NodeID, ResourceID: id,
			Generation: want.Generation, Convergence: wire.ConvergencePending,
			CorrelationID: req.CorrelationID, Actor: req.Actor,
		},
		run: func(ctx context.Context) (any, error) { return nil, n.runAction(ctx, id, action, want) },
		onCancel: func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			// Undo the desire only if no newer write replaced it.
			if cur := n.desired[id]; cur != nil && cur.Generation == want.Generation {
				cur.State, cur.ActionID, cur.Target, cur.Authority = prev.State, prev.ActionID, prev.Target, prev.Authority
			}
		},
	}
	rec := n.ops.submit(o)
	n.event(wire.Event{Kind: wire.EventIntentAccepted, ResourceID: id, OperationID: opID, CorrelationID: req.CorrelationID, Actor: req.Actor, Outcome: "accepted", Message: action + " accepted", Data: map[string]any{"operation": action, "generation": want.Generation}})
	return rec, view, nil
}

func (n *Node) runAction(ctx context.Context, id, action string, want desired) error {
	var err error
	switch action {
	case OpStart:
		err = n.opts.Engine.Start(ctx, id)
	case OpStop:
		err = n.opts.Engine.Stop(ctx, id)
	case OpRestart:
		err = n.opts.Engine.Restart(ctx, id)
	}
	if err != nil {
		// Engine errors may quote resolved secret values.
		return &opError{Class: "engine", Code: "engine_error", Message: n.redact(err.Error())}
	}
	n.mu.Lock()
	n.applied[id] = applied{Generation: want.Target, ConfigVersion: want.ConfigVersion, ActionID: want.ActionID}
	n.mu.Unlock()
	return nil
}

// AdoptHubDesire makes the Hub's desire, as the Agent last applied it, the
// stream's desired view without running anything: state, the Hub's
// generation and the restart's action id, under authority hub. The Agent
// calls it at boot for a stream already in the state the Hub wants, so that
// the node shows the Hub's generation, as the Agent reports it. The
// configuration version stays the node's own.
func (n *Node) AdoptHubDesire(id, state string, generation int64, actionID string) error {
	if generation < 1 {
		return fmt.Errorf("hub generation %d: must be positive", generation)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	d, ok := n.desired[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrStreamNotFound, id)
	}
	d.State, d.Generation, d.Target, d.ActionID, d.Authority = state, generation, generation, actionID, AuthorityHub
	a := n.applied[id]
	a.Generation, a.ActionID = generation, actionID
	n.applied[id] = a
	return nil
}

func desiredView(d *desired) wire.StreamDesired {
	return wire.StreamDesired{State: d.State, Generation: d.Generation, ConfigVersion: d.ConfigVersion, ActionID: d.ActionID}
}

// Streams returns every stream's views in configuration order.
func (n *Node) Streams() []wire.Stream {
	statuses := n.opts.Engine.Streams()
	out := make([]wire.Stream, 0, len(statuses))
	for _, st := range statuses {
		out = append(out, n.view(st))
	}
	return out
}

// Stream returns one stream's views.
func (n *Node) Stream(id string) (wire.Stream, error) {
	for _, st := range n.opts.Engine.Streams() {
		if st.ID == id {
			return n.view(st), nil
		}
	}
	return wire.Stream{}, fmt.Errorf("%w: %q", ErrStreamNotFound, id)
}

func (n *Node) view(st engine.StreamStatus) wire.Stream {
	pending := n.ops.active(st.ID)
	n.mu.Lock()
	d := n.desired[st.ID]
	a := n.applied[st.ID]
	var dv wire.StreamDesired
	authority := AuthorityNode
	if d != nil {
		dv, authority = desiredView(d), d.Authority
	}
	conv := convergence(d, st.State, a, pending)
	n.mu.Unlock()
	v := wire.Stream{
		ID: st.ID, NodeID: n.opts.NodeID, Desired: dv, Convergence: conv, Authority: authority,
		Observed: wire.StreamObserved{
			State: string(st.State), Generation: a.Generation, ConfigVersion: a.ConfigVersion, ActionID: a.ActionID,
			LastError: n.redact(st.LastError), LastErrorAt: wire.At(st.LastErrorAt), StartedAt: wire.At(st.StartedAt),
			Counters: wire.StreamCounters{Received: st.Received, Sent: st.Sent, Errors: st.Errors, Dropped: st.Dropped, Retries: st.Retries, InFlight: st.InFlight, Abandoned: st.Abandoned},
		},
	}
	if op, ok := n.ops.latestOf(st.ID, func(name string) bool { return !isJobOp(name) }); ok {
		op = n.decorate(op, map[string]wire.Stream{st.ID: {ID: st.ID, Convergence: conv}})
		op.Observed = nil // the view itself holds the observation
		v.LatestOperation = &op
	}
	return v
}

// ErrOperationNotFound is returned by WaitOperation for an unknown id.
var ErrOperationNotFound = errOpNotFound

// WaitOperation waits until the operation has finished (succeeded, failed
// or cancelled) and returns its record, or returns ctx's error first. The
// Agent uses it to carry out a Hub command as a node operation.
func (n *Node) WaitOperation(ctx context.Context, id string) (wire.Operation, error) {
	rec, err := n.ops.wait(ctx, id)
	if err != nil {
		return rec, err
	}
	return n.decorate(rec, n.streamViews()), nil
}

// Operation returns one operation record.
func (n *Node) Operation(id string) (wire.Operation, bool) {
	rec, ok := n.ops.get(id)
	if ok {
		rec = n.decorate(rec, n.streamViews())
	}
	return rec, ok
}

// Operations lists operation records newest first.
func (n *Node) Operations(f opFilter) []wire.Operation {
	recs := n.ops.list(f)
	views := n.streamViews()
	for i := range recs {
		recs[i] = n.decorate(recs[i], views)
	}
	return recs
}

func (n *Node) streamViews() map[string]wire.Stream {
	m := map[string]wire.Stream{}
	for _, v := range n.Streams() {
		m[v.ID] = v
	}
	return m
}

// decorate fills the fields of a record that are derived when it is read:
// its convergence and, for stream operations, the latest observation.
func (n *Node) decorate(rec wire.Operation, views map[string]wire.Stream) wire.Operation {
	v, isStream := views[rec.ResourceID]
	isStream = isStream && !isJobOp(rec.Operation)
	if isStream {
		obs := v.Observed
		rec.Observed = &obs
	}
	switch {
	case rec.State == wire.OpPending:
		rec.Convergence = wire.ConvergencePending
	case rec.State == wire.OpDispatched:
		rec.Convergence = wire.ConvergenceApplying
	case rec.State == wire.OpFailed:
		rec.Convergence = wire.ConvergenceDegraded
	case isStream:
		rec.Convergence = v.Convergence
	case isJobOp(rec.Operation) && rec.State == wire.OpSucceeded:
		// The engine carried the action out; the job's view says the rest.
		rec.Convergence = wire.ConvergenceInSync
	case rec.ResourceID == ConfigResource && rec.State == wire.OpSucceeded:
		rec.Convergence = wire.ConvergenceInSync
	default:
		rec.Convergence = wire.ConvergenceUnknown
	}
	return rec
}

// CancelOperation cancels a pending operation and records the event.
func (n *Node) CancelOperation(id string, req Request) (wire.Operation, error) {
	rec, err := n.ops.cancel(id)
	if err != nil {
		return rec, err
	}
	n.event(wire.Event{Kind: wire.EventOperationCancelled, ResourceID: rec.ResourceID, OperationID: rec.OperationID, CorrelationID: req.CorrelationID, Actor: req.Actor, Outcome: "cancelled", Message: rec.Operation + " cancelled before it ran"})
	return rec, nil
}

// ConfigVersion is the applied configuration version.
func (n *Node) ConfigVersion() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cfgVersion
}
