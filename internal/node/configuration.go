package node

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/node/history"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/wire"
)

// ConfigResource is the resource id of configuration operations.
const ConfigResource = "configuration"

// Document is a configuration as a client sent it: the text keeps its
// secret references.
type Document struct {
	Format  config.Format
	Content []byte
}

// Report is the answer of a validation.
type Report struct {
	Valid  bool             `json:"valid"`
	Errors []config.Problem `json:"errors"`
}

// ValidationError is returned when a document to apply is invalid.
type ValidationError struct{ Report Report }

// Error counts the problems and quotes the first (redacted, as every
// problem of a Report): a failure that travels without the report (a
// rollout node's failure) still says what is wrong and where.
func (e *ValidationError) Error() string {
	msg := fmt.Sprintf("configuration has %d problems", config.TotalProblems(e.Report.Errors))
	if len(e.Report.Errors) > 0 {
		msg += "; the first: " + e.Report.Errors[0].Error()
	}
	return msg
}

// ErrVersionNotFound is returned for an unknown configuration version.
var ErrVersionNotFound = errors.New("configuration version not found")

// ErrNoDraft is returned by ApplyDraft when no draft is saved.
var ErrNoDraft = errors.New("no draft saved")

// errNoHistory is returned by the configuration calls before AttachHistory;
// the API answers 503.
var errNoHistory = errors.New("configuration history is not available")

// configState is the node's configuration: the history and the resolved
// configuration the engine runs. It is guarded by Node.mu.
type configState struct {
	hist     *history.Store
	resolver secretref.Resolver
	current  *config.Config
}

// AttachHistory gives the node its configuration history and the resolved
// configuration of the applied version. Without it the configuration
// routes answer 503.
func (n *Node) AttachHistory(h *history.Store, res secretref.Resolver, current *config.Config) {
	n.opts.Secrets.Merge(current.Redactor())
	n.mu.Lock()
	defer n.mu.Unlock()
	n.conf = configState{hist: h, resolver: res, current: current}
}

// Validate runs the one materialization path and the deep build on doc.
func (n *Node) Validate(doc Document) (Report, *config.Config) {
	n.mu.Lock()
	res := n.conf.resolver
	n.mu.Unlock()
	rep, cfg, _ := n.validateWith(doc, res, nil)
	return rep, cfg
}

// validateWith is Validate with the resolver of doc's references. check,
// when not nil, is the remote policy's word on the materialized
// configuration of work the Hub delivered: it runs before the deep build,
// whose components are then built in the remote sandbox (a codec reads
// its proto_inputs as the policy allows), and its error is returned with
// the refusals as the report.
func (n *Node) validateWith(doc Document, res secretref.Resolver, check func(*config.Config) error) (Report, *config.Config, error) {
	cfg, err := config.Materialize(doc.Content, doc.Format, n.opts.Registry, res)
	problems := config.Problems(err)
	if cfg != nil && len(problems) == 0 {
		var sb engine.Sandbox
		if check != nil {
			if err := check(cfg); err != nil {
				return policyReport(err), cfg, err
			}
			if n.opts.Policy != nil {
				sb = engine.Sandbox{FS: n.opts.Policy.FS(), Net: n.opts.Policy.Net()}
			}
		}
		problems = config.CapProblems(cfg.Redact(engine.CheckIn(cfg, n.opts.Registry, sb)))
	}
	// The running configuration's values too: a message may quote one.
	problems = n.opts.Secrets.Problems(problems)
	if problems == nil {
		problems = []config.Problem{}
	}
	return Report{Valid: len(problems) == 0, Errors: problems}, cfg, nil
}

// Configuration returns the applied version, its literal credentials
// masked (config.MaskCredentials): fit to be served.
func (n *Node) Configuration() (history.Version, error) {
	h, err := n.history()
	if err != nil {
		return history.Version{}, err
	}
	v, err := h.Applied()
	if err != nil {
		return v, err
	}
	v.Content = n.masked.mask(v.Content, v.Format)
	return v, nil
}

// Versions lists the history, oldest first.
func (n *Node) Versions() ([]history.Version, error) {
	h, err := n.history()
	if err != nil {
		return nil, err
	}
	return h.List(), nil
}

// SaveDraft stores a working draft (valid or not) and reports on it.
func (n *Node) SaveDraft(doc Document) (history.Draft, Report, error) {
	h, err := n.history()
	if err != nil {
		return history.Draft{}, Report{}, err
	}
	rep, _ := n.Validate(doc)
	d, err := h.SaveDraft(doc.Content, doc.Format, n.opts.Now())
	d.Content = n.masked.mask(d.Content, d.Format)
	return d, rep, err
}

// Draft returns the saved draft, its literal credentials masked.
func (n *Node) Draft() (history.Draft, bool, error) {
	h, err := n.history()
	if err != nil {
		return history.Draft{}, false, err
	}
	d, ok := h.Draft()
	d.Content = n.masked.mask(d.Content, d.Format)
	return d, ok, nil
}

func (n *Node) history() (*history.Store, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conf.hist == nil {
		return nil, errNoHistory
	}
	return n.conf.hist, nil
}

// Apply validates doc, appends it to the history as a new version and
// queues its application: unchanged streams keep running.
func (n *Node) Apply(doc Document, req Request) (wire.Operation, error) {
	return n.apply(doc, "api", "", OpApply, req)
}

// ApplyDraft applies the saved draft as Apply would its text (a new
// version from the API); the draft stays saved. No draft: ErrNoDraft.
func (n *Node) ApplyDraft(req Request) (wire.Operation, error) {
	h, err := n.history()
	if err != nil {
		return wire.Operation{}, err
	}
	d, ok := h.Draft()
	if !ok {
		return wire.Operation{}, ErrNoDraft
	}
	return n.apply(Document{Format: d.Format, Content: d.Content}, history.SourceAPI, "", OpApply, req)
}

// ApplyVersion applies the text of a stored version through the apply
// operation. Like Rollback, the new version records the version it came
// from (source "rollback", rolled_back_from), since it re-applies that
// version's text.
func (n *Node) ApplyVersion(versionID string, req Request) (wire.Operation, error) {
	return n.reapply(versionID, OpApply, req, false)
}

// Rollback re-applies the text of an earlier version as a new version.
func (n *Node) Rollback(versionID string, req Request) (wire.Operation, error) {
	return n.reapply(versionID, OpRollback, req, false)
}

// reapply applies the text of version versionID again. hub says the Hub
// asked: a version whose text the Hub gave then meets the remote policy
// again (it may have changed since), as a new delivery would.
func (n *Node) reapply(versionID, opName string, req Request, hub bool) (wire.Operation, error) {
	h, err := n.history()
	if err != nil {
		return wire.Operation{}, err
	}
	v, err := h.Get(versionID)
	if errors.Is(err, history.ErrNotFound) {
		return wire.Operation{}, fmt.Errorf("%w: %q", ErrVersionNotFound, versionID)
	}
	if err != nil {
		return wire.Operation{}, err
	}
	doc := Document{Format: v.Format, Content: v.Content}
	if hub && (v.Source == history.SourceHub || v.HubVersion != "") {
		if err := n.policyDocument(doc, nil); err != nil {
			return wire.Operation{}, err
		}
		n.mu.Lock()
		res := n.conf.resolver
		n.mu.Unlock()
		return n.applyWith(doc, res, history.SourceRollback, history.Meta{RolledBackFrom: v.ID}, opName, req, n.policyConfig)
	}
	return n.apply(doc, history.SourceRollback, v.ID, opName, req)
}

func (n *Node) apply(doc Document, source, from, opName string, req Request) (wire.Operation, error) {
	n.mu.Lock()
	res := n.conf.resolver
	n.mu.Unlock()
	return n.applyWith(doc, res, source, history.Meta{RolledBackFrom: from}, opName, req, nil)
}

// applyWith validates doc, its references resolved by res, appends it to
// the history with meta (actor and correlation id from req) and queues
// its application: the one apply path of every source. check, when not
// nil, is the remote policy's word on the materialized configuration,
// before its deep build (see validateWith): its error (a *policy.Error)
// refuses the apply before anything is kept or runs, and the Hub's
// configuration then runs in the engine's remote sandbox.
func (n *Node) applyWith(doc Document, res secretref.Resolver, source string, meta history.Meta, opName string, req Request, check func(*config.Config) error) (wire.Operation, error) {
	h, err := n.history()
	if err != nil {
		return wire.Operation{}, err
	}
	rep, cfg, err := n.validateWith(doc, res, check)
	if err != nil {
		return wire.Operation{}, err
	}
	if !rep.Valid {
		return wire.Operation{}, &ValidationError{Report: rep}
	}
	meta.Actor, meta.CorrelationID = req.Actor, req.CorrelationID
	v, err := h.Append(doc.Content, doc.Format, source, meta)
	if err != nil {
		return wire.Operation{}, err
	}
	opID := n.opts.NewID()
	o := &op{
		rec: wire.Operation{
			OperationID: opID, IntentID: opID, Operation: opName, NodeID: n.opts.NodeID, ResourceID: ConfigResource,
			Convergence: wire.ConvergencePending, CorrelationID: req.CorrelationID, Actor: req.Actor,
		},
		run: func(ctx context.Context) (any, error) { return n.runApply(ctx, v, cfg, req, check != nil) },
	}
	rec := n.ops.submit(o)
	data := map[string]any{"operation": opName, "config_version": v.ID}
	if v.HubVersion != "" {
		data["hub_version"] = v.HubVersion
	}
	n.event(wire.Event{Kind: wire.EventIntentAccepted, ResourceID: ConfigResource, OperationID: opID, CorrelationID: req.CorrelationID, Actor: req.Actor, Outcome: "accepted", Message: opName + " of " + v.ID + " accepted", Data: data})
	return rec, nil
}

// codeStreamStartFailed is the failure code of an apply whose version was
// applied but a stream of which failed to start.
const codeStreamStartFailed = "stream_start_failed"

// ApplyResult is the result field of an apply or rollback operation.
type ApplyResult struct {
	ConfigVersion string   `json:"config_version"`
	Added         []string `json:"added"`
	Removed       []string `json:"removed"`
	Changed       []string `json:"changed"`
	Unchanged     []string `json:"unchanged"`
}

// runApply runs cfg; remote says the Hub delivered it: its streams and
// jobs then reach files and destinations through the engine's remote
// sandbox (the remote policy at use).
func (n *Node) runApply(ctx context.Context, v history.Version, cfg *config.Config, req Request, remote bool) (any, error) {
	n.mu.Lock()
	old := n.conf.current
	n.mu.Unlock()
	res := diffStreams(old, cfg)
	res.ConfigVersion = v.ID
	// Before the engine runs it: its streams may log or fail at once.
	n.opts.Secrets.Merge(cfg.Redactor())
	applyErr := n.opts.Engine.ApplyWith(ctx, cfg, engine.ApplyOptions{Remote: remote})
	if err := n.conf.hist.MarkApplied(v.ID); err != nil {
		return res, err
	}
	changed := map[string]bool{}
	for _, id := range slices.Concat(res.Added, res.Changed) {
		changed[id] = true
	}
	n.mu.Lock()
	n.conf.current = cfg
	n.setConfigLocked(cfg, v.ID, changed)
	n.mu.Unlock()
	data := map[string]any{"config_version": v.ID, "added": len(res.Added), "removed": len(res.Removed), "changed": len(res.Changed)}
	if v.HubVersion != "" {
		data["hub_version"] = v.HubVersion
	}
	n.event(wire.Event{Kind: wire.EventConfigurationApplied, ResourceID: ConfigResource, CorrelationID: req.CorrelationID, Actor: req.Actor, Outcome: "applied", Message: "configuration " + v.ID + " applied", Data: data})
	if applyErr != nil {
		return res, &opError{Class: "engine", Code: codeStreamStartFailed, Message: "configuration applied, but a stream failed to start: " + n.redact(applyErr.Error())}
	}
	return res, nil
}

// diffStreams compares two configurations' streams by id.
func diffStreams(a, b *config.Config) ApplyResult {
	r := ApplyResult{Added: []string{}, Removed: []string{}, Changed: []string{}, Unchanged: []string{}}
	old := map[string]config.Stream{}
	if a != nil {
		for _, s := range a.Streams {
			old[s.ID] = s
		}
	}
	for _, s := range b.Streams {
		o, ok := old[s.ID]
		switch {
		case !ok:
			r.Added = append(r.Added, s.ID)
		case reflect.DeepEqual(o, s):
			r.Unchanged = append(r.Unchanged, s.ID)
		default:
			r.Changed = append(r.Changed, s.ID)
		}
		delete(old, s.ID)
	}
	for id := range old {
		r.Removed = append(r.Removed, id)
	}
	slices.Sort(r.Removed)
	return r
}

// redact removes from msg every secret value of the configurations the
// node ran: engine and runtime errors (an address in use, a path that
// cannot be created) may quote them, and no response may.
func (n *Node) redact(msg string) string { return n.opts.Secrets.String(msg) }
