package hub

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/placement"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// Job problem codes (API.md), and the placement failures a create or a
// move answers with (the audit record's stable failure codes).
const (
	CodeJobNotFound             = "job_not_found"
	CodeJobMustBeStopped        = "job_must_be_stopped"
	CodeStateFormatIncompatible = "state_format_incompatible"
	CodeCheckpointNotFound      = "checkpoint_not_found"
)

// Audit actions of job mutations beyond the command names.
const (
	ActionJobCreate   = "job_create"
	ActionJobDesired  = "job_desired_state"
	ActionJobUpgrade  = "job_upgrade"
	ActionJobRollback = "job_rollback"
	ActionJobRestart  = "job_restart"
	ActionJobMove     = "job_move"
)

// jobActions are the one-shot actions of POST /jobs/{id}/actions/{action}.
var jobActions = []string{"start", "stop", "restart", "move"}

// maxNodeIDs bounds node_ids in job bodies.
const maxNodeIDs = 64

func (h *Hub) jobRoutes(p string) []httpapi.Route {
	return []httpapi.Route{
		{Method: "POST", Pattern: p + "/jobs", Handler: h.auditedAs(store.KindJob, fixedAction(ActionJobCreate), h.postJob)},
		{Method: "POST", Pattern: p + "/jobs/validate", Handler: h.postJobValidate},
		{Method: "GET", Pattern: p + "/jobs", Handler: h.getJobs},
		{Method: "GET", Pattern: p + "/jobs/{id}", Handler: h.getJob},
		{Method: "GET", Pattern: p + "/jobs/{id}/status", Handler: h.getJob},
		{Method: "GET", Pattern: p + "/jobs/{id}/detail", Handler: h.getJobDetail},
		{Method: "GET", Pattern: p + "/jobs/{id}/versions", Handler: h.getJobVersions},
		{Method: "GET", Pattern: p + "/jobs/{id}/plan", Handler: h.getJobPlan},
		{Method: "PUT", Pattern: p + "/jobs/{id}/desired-state", Handler: h.auditedAs(store.KindJob, fixedAction(ActionJobDesired), h.putJobDesired)},
		{Method: "GET", Pattern: p + "/jobs/{id}/checkpoints", Handler: h.getArtifacts(wire.ArtifactCheckpoint)},
		{Method: "POST", Pattern: p + "/jobs/{id}/checkpoints", Handler: h.auditedAs(store.KindJob, fixedAction(wire.CommandJobCheckpoint), h.postArtifact(wire.ArtifactCheckpoint))},
		{Method: "GET", Pattern: p + "/jobs/{id}/savepoints", Handler: h.getArtifacts(wire.ArtifactSavepoint)},
		{Method: "POST", Pattern: p + "/jobs/{id}/savepoints", Handler: h.auditedAs(store.KindJob, fixedAction(wire.CommandJobSavepoint), h.postArtifact(wire.ArtifactSavepoint))},
		{Method: "GET", Pattern: p + "/jobs/{id}/upgrades", Handler: h.getUpgrades},
		{Method: "POST", Pattern: p + "/jobs/{id}/upgrades", Handler: h.auditedAs(store.KindJob, fixedAction(ActionJobUpgrade), h.postUpgrade)},
		{Method: "POST", Pattern: p + "/jobs/{id}/upgrades/{upgrade_id}/rollback", Handler: h.auditedAs(store.KindJob, fixedAction(ActionJobRollback), h.postRollback)},
		{Method: "POST", Pattern: p + "/jobs/{id}/actions/{action}", Handler: h.auditedAs(store.KindJob, jobActionName, h.postJobAction)},
	}
}

func jobActionName(r *http.Request) string {
	if a := r.PathValue("action"); slices.Contains(jobActions, a) {
		return "job_" + a
	}
	return "job_action"
}

// jobNotFound is the 404 of an unknown job id.
func jobNotFound() error {
	return httpapi.NotFound(CodeJobNotFound, "no job with that id")
}

// jobProblem maps the store's job errors.
func jobProblem(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return jobNotFound()
	}
	return storeProblem(err)
}

// jobWrite is one job mutation as the handlers build it; writeJob fills in
// the ids, times and principal.
type jobWrite struct {
	store.JobWrite
	payload wire.CommandPayload
	upgrade *wire.JobUpgrade
}

// writeJob is the job intent pipeline: one store transaction, then 202
// with the operation's Location and the new generation's ETag. Nothing
// else happens on the request path but a nudge to the reconciler.
func (h *Hub) writeJob(w http.ResponseWriter, r *http.Request, jw jobWrite) error {
	gen, matchAny, present, err := httpapi.ParseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		return err
	}
	if present && !matchAny {
		jw.IfMatch = &gen
	}
	now := h.opts.Now()
	jw.IntentID = h.opts.NewID()
	if jw.upgrade != nil {
		jw.upgrade.OperationID, jw.upgrade.CreatedAt = jw.IntentID, wire.At(now)
		jw.Upgrade = jw.upgrade
	}
	if jw.NodeID != "" && jw.FenceIntentID == "" {
		jw.FenceIntentID = h.opts.NewID()
	}
	jw.NewIntentID = h.opts.NewID
	jw.Payload, err = json.Marshal(jw.payload)
	if err != nil {
		return err
	}
	// A split job's other nodes get the same stop: asked for a savepoint,
	// a follower waits for its coordinator to take it and end the job
	// (stopping first would fail the savepoint's barrier).
	jw.CorrelationID, jw.Actor = httpapi.CorrelationID(r.Context()), httpapi.Principal(r.Context())
	jw.Now, jw.ExpiresAt = now, now.Add(h.opts.Settings.IntentTTL)
	res, err := h.st.WriteJob(r.Context(), jw.JobWrite)
	var gc *store.GenerationConflictError
	switch {
	case errors.As(err, &gc):
		return httpapi.GenerationConflict(gc.Expected, gc.Current, map[string]any{"job_id": jw.JobID})
	case errors.Is(err, store.ErrExists):
		return httpapi.Conflict(httpapi.CodeConflict, "a job with that id already exists; upgrade it or choose another id")
	case errors.Is(err, store.ErrNotFound):
		return jobNotFound()
	case err != nil:
		return h.storeFailed(err)
	}
	h.metrics.accepted.Inc()
	node := res.Intent.NodeID
	others := append(slices.Clone(res.Peers), res.Fences...)
	h.fleet.Mark(node)
	for _, in := range others {
		h.fleet.Mark(in.NodeID)
	}
	status := h.fleet.Status(node)
	var warnings []wire.Warning
	if status == reconcile.StatusUnknown {
		warnings = append(warnings, wire.Warning{Code: wire.WarningNodeUnknown,
			Message: "no node with this id has registered with the Hub; the intent waits for it until it expires"})
	}
	h.nudge()
	h.converge(node, jw.JobID)
	for _, in := range others {
		h.converge(in.NodeID, jw.JobID)
	}
	version, _ := strconv.Atoi(res.Intent.ConfigVersion)
	w.Header().Set("Location", h.prefix+"/operations/"+res.Intent.ID)
	w.Header().Set("ETag", httpapi.ETag(res.Generation))
	return httpapi.WriteJSON(w, http.StatusAccepted, wire.JobDesiredResponse{
		OperationID: res.Intent.ID, IntentID: res.Intent.ID, NodeID: node, JobID: jw.JobID, Generation: res.Generation,
		DesiredState: res.Intent.DesiredState, Version: version, ActionID: res.Intent.ActionID,
		Convergence: wire.ConvergencePending, NodeStatus: status, Upgrade: jw.Upgrade, Warnings: warnings,
	})
}

// startPayload is the job_start payload of a version, restoring what
// restore says (nil: the spec's recovery mode).
func startPayload(v store.JobVersion, restore *wire.JobRestore) wire.CommandPayload {
	p := wire.CommandPayload{State: "running"}
	p.Spec, p.JobVersion = v.Spec, v.Version
	if restore != nil {
		p.Recovery, p.Restore = restore.Recovery, restore.Artifact
	}
	return p
}

// stopPayload is the job_stop payload: the version the job is desired at
// (a stopped job reports it back) and whether to take a savepoint first.
func stopPayload(version int, savepoint bool) wire.CommandPayload {
	p := wire.CommandPayload{State: "stopped"}
	p.JobVersion, p.Savepoint = version, savepoint
	return p
}

func (h *Hub) postJob(w http.ResponseWriter, r *http.Request) error {
	var body wire.JobCreateRequest
	if err := httpapi.DecodeJSON(r, &body, MaxBodyBytes); err != nil {
		return err
	}
	probs := append(checkNodeIDs(body.NodeIDs), checkPlacement(body.Placement)...)
	if body.DesiredState != "running" && body.DesiredState != "stopped" {
		probs = append(probs, httpapi.FieldProblem{Path: "desired_state", Message: "must be running or stopped"})
	}
	m, sp := h.materializeJob(body.Spec)
	if probs = append(probs, sp...); len(probs) > 0 {
		return httpapi.Validation(probs)
	}
	v := store.JobVersion{JobID: m.job.ID, Version: m.job.Version, Spec: body.Spec, Plan: m.explain}
	jw := jobWrite{JobWrite: store.JobWrite{JobID: m.job.ID, Action: ActionJobCreate, State: body.DesiredState,
		Create: &store.JobCreate{Requested: body.NodeIDs, Version: v}}}
	if body.Placement == wire.PlacementSplit {
		split, err := h.placeSplit(r.Context(), m, body.NodeIDs, nil)
		if err != nil {
			return err
		}
		jw.NodeID, jw.Create.Strategy, jw.Split = split.coordinator, split.strategy, &split.split
	} else {
		dec, err := h.place(r.Context(), placement.Request{Required: m.required, Requested: body.NodeIDs})
		if err != nil {
			return err
		}
		jw.NodeID, jw.Create.Strategy = dec.NodeID, dec.Strategy
	}
	if body.DesiredState == "running" {
		jw.Operation, jw.payload = wire.CommandJobStart, startPayload(v, nil)
	} else {
		jw.Operation, jw.payload = wire.CommandJobStop, stopPayload(v.Version, false)
	}
	return h.writeJob(w, r, jw)
}

// checkNodeIDs checks the node_ids of a job body.
func checkNodeIDs(ids []string) []httpapi.FieldProblem {
	var probs []httpapi.FieldProblem
	if len(ids) > maxNodeIDs {
		return []httpapi.FieldProblem{{Path: "node_ids", Message: "at most " + strconv.Itoa(maxNodeIDs) + " node ids"}}
	}
	for i, id := range ids {
		if !wire.ValidID(id) {
			probs = append(probs, httpapi.FieldProblem{Path: "node_ids[" + strconv.Itoa(i) + "]", Message: idMessage})
		}
	}
	return probs
}

// place chooses a job's node. Named nodes that cannot take it now (offline,
// draining, unknown) still get it, the first named, as a stream write for
// an offline node does: the intent waits for the node. Without names, no
// capable node online is a 409 with the reason per node.
func (h *Hub) place(ctx context.Context, req placement.Request) (placement.Decision, error) {
	cands, err := h.candidates(ctx)
	if err != nil {
		return placement.Decision{}, storeProblem(err)
	}
	dec, err := placement.Choose(cands, req)
	var nn *placement.NoNodeError
	switch {
	case err == nil:
		return dec, nil
	case len(req.Requested) > 0 && errors.As(err, &nn) && !lacksOnly(nn, req.Requested):
		return placement.Decision{NodeID: req.Requested[0], Strategy: placement.StrategyRequested}, nil
	case errors.As(err, &nn):
		code, msg := reconcile.CodeNodeUnavailable, "no node that can run the job is online and active"
		for _, reason := range nn.Reasons {
			if strings.HasPrefix(reason, placement.ReasonMissingCapability) {
				code, msg = reconcile.CodeIncompatibleCapability, "no online node advertises every capability the job needs"
			}
		}
		e := httpapi.Conflict(code, msg)
		e.Details = map[string]any{"nodes": nn.Reasons, "required_capabilities": req.Required}
		return placement.Decision{}, e
	}
	return placement.Decision{}, err
}

// lacksOnly reports whether every requested node was refused for a
// missing capability: giving it the job anyway would never converge.
func lacksOnly(nn *placement.NoNodeError, requested []string) bool {
	for _, id := range requested {
		if !strings.HasPrefix(nn.Reasons[id], placement.ReasonMissingCapability) {
			return false
		}
	}
	return true
}

// candidates is every known node with its liveness, mode, capabilities
// and the number of jobs placed on it.
func (h *Hub) candidates(ctx context.Context) ([]placement.Candidate, error) {
	jobs, err := h.st.ListJobs(ctx)
	if err != nil {
		return nil, err
	}
	load := map[string]int{}
	for _, j := range jobs {
		for _, n := range j.Nodes() {
			load[n]++
		}
	}
	nodes := h.fleet.Nodes()
	out := make([]placement.Candidate, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, placement.Candidate{NodeID: n.NodeID, Status: n.Status, Mode: n.Mode,
			Capabilities: n.Capabilities, Jobs: load[n.NodeID], DataAddress: n.DataAddress})
	}
	slices.SortFunc(out, func(a, b placement.Candidate) int { return cmpString(a.NodeID, b.NodeID) })
	return out, nil
}

func (h *Hub) putJobDesired(w http.ResponseWriter, r *http.Request) error {
	var body wire.JobDesiredRequest
	if err := httpapi.DecodeJSON(r, &body, MaxBodyBytes); err != nil {
		return err
	}
	var probs []httpapi.FieldProblem
	switch {
	case body.State != "running" && body.State != "stopped":
		probs = append(probs, httpapi.FieldProblem{Path: "state", Message: "must be running or stopped"})
	case body.Savepoint && body.State != "stopped":
		probs = append(probs, httpapi.FieldProblem{Path: "savepoint", Message: "only with state stopped"})
	case body.Recovery != "" && body.State != "running":
		probs = append(probs, httpapi.FieldProblem{Path: "recovery", Message: "only with state running"})
	case body.Recovery != "" && !slices.Contains([]string{"latest_checkpoint", "latest_savepoint", "fail", wire.RecoveryNone}, body.Recovery):
		probs = append(probs, httpapi.FieldProblem{Path: "recovery", Message: "must be latest_checkpoint, latest_savepoint, fail or none"})
	}
	if len(probs) > 0 {
		return httpapi.Validation(probs)
	}
	js, err := h.st.GetJobState(r.Context(), r.PathValue("id"))
	if err != nil {
		return jobProblem(err)
	}
	jw := jobWrite{JobWrite: store.JobWrite{JobID: js.Job.ID, State: body.State}}
	if body.State == "running" {
		restore := js.Job.Restore
		if body.Recovery != "" {
			restore = &wire.JobRestore{Recovery: body.Recovery}
		}
		jw.Operation, jw.Action, jw.payload = wire.CommandJobStart, wire.CommandJobStart, startPayload(js.Version, restore)
		jw.SetRestore = true // a start consumes the restore choice
	} else {
		jw.Operation, jw.Action = wire.CommandJobStop, wire.CommandJobStop
		jw.payload = stopPayload(js.Job.Version, body.Savepoint)
	}
	return h.writeJob(w, r, jw)
}

func (h *Hub) postJobAction(w http.ResponseWriter, r *http.Request) error {
	action := r.PathValue("action")
	if !slices.Contains(jobActions, action) {
		return httpapi.NotFound(httpapi.CodeNotFound, "unknown job action "+quote(action)+"; one of start, stop, restart, move")
	}
	var move wire.JobMoveRequest
	if _, err := httpapi.DecodeOptionalJSON(r, &move, MaxBodyBytes); err != nil {
		return err
	}
	if move.NodeID != "" && (action != "move" || !wire.ValidID(move.NodeID)) {
		return httpapi.Validation([]httpapi.FieldProblem{{Path: "node_id", Message: "a valid node id, only for move"}})
	}
	if len(move.NodeIDs) > 0 {
		probs := checkNodeIDs(move.NodeIDs)
		if action != "move" || move.NodeID != "" {
			probs = append(probs, httpapi.FieldProblem{Path: "node_ids", Message: "only for move, and not with node_id"})
		}
		if len(probs) > 0 {
			return httpapi.Validation(probs)
		}
	}
	js, err := h.st.GetJobState(r.Context(), r.PathValue("id"))
	if err != nil {
		return jobProblem(err)
	}
	jw := jobWrite{JobWrite: store.JobWrite{JobID: js.Job.ID}}
	switch action {
	case "start":
		jw.Action, jw.Operation, jw.State = wire.CommandJobStart, wire.CommandJobStart, "running"
		jw.payload, jw.SetRestore = startPayload(js.Version, js.Job.Restore), true
	case "stop":
		jw.Action, jw.Operation, jw.State, jw.payload = wire.CommandJobStop, wire.CommandJobStop, "stopped", stopPayload(js.Job.Version, false)
	case "restart":
		jw.Action, jw.Operation, jw.State, jw.ActionID = ActionJobRestart, wire.CommandJobStart, "running", h.opts.NewID()
		jw.payload, jw.SetRestore = startPayload(js.Version, js.Job.Restore), true
	case "move":
		m, probs := h.materializeJob(js.Version.Spec)
		if len(probs) > 0 {
			return httpapi.Validation(probs)
		}
		if js.Job.Placement == wire.PlacementSplit {
			return h.moveSplit(w, r, js, m, move)
		}
		if len(move.NodeIDs) > 0 {
			return httpapi.Validation([]httpapi.FieldProblem{{Path: "node_ids", Message: "only for a split job; name node_id"}})
		}
		req := placement.Request{Required: m.required, Exclude: []string{js.Job.NodeID}}
		if move.NodeID != "" {
			if move.NodeID == js.Job.NodeID {
				return httpapi.Conflict(httpapi.CodeConflict, "the job already runs on that node")
			}
			req.Requested = []string{move.NodeID}
		}
		cands, err := h.candidates(r.Context())
		if err != nil {
			return storeProblem(err)
		}
		dec, err := placement.Choose(cands, req)
		var nn *placement.NoNodeError
		if errors.As(err, &nn) {
			e := httpapi.Conflict(reconcile.CodeNodeUnavailable, "no other capable node is online and active to move the job to")
			e.Details = map[string]any{"nodes": nn.Reasons, "required_capabilities": req.Required}
			return e
		}
		if err != nil {
			return err
		}
		// The new node resumes from the newest checkpoint or savepoint; the
		// old one gets a stop that never expires, and the generation fences
		// its artifact store.
		jw.NodeID = dec.NodeID
		jw = movedWrite(jw, js)
	}
	return h.writeJob(w, r, jw)
}

// movedWrite finishes a move's write (jw names the new node): the job
// keeps its desired state and resumes from the newest checkpoint or
// savepoint unless a restore was chosen already.
func movedWrite(jw jobWrite, js store.JobState) jobWrite {
	jw.Action, jw.State = ActionJobMove, js.Job.DesiredState
	restore := &wire.JobRestore{Recovery: wire.RecoveryNewest}
	if js.Job.Restore != nil {
		restore = js.Job.Restore
	}
	if jw.State == "running" {
		jw.Operation, jw.payload, jw.SetRestore = wire.CommandJobStart, startPayload(js.Version, restore), true
	} else {
		jw.Operation, jw.payload = wire.CommandJobStop, stopPayload(js.Job.Version, false)
		jw.Restore, jw.SetRestore = restore, true
	}
	return jw
}

// stoppedAndConverged is the upgrade precondition: desired stopped and
// in_sync.
func (h *Hub) stoppedAndConverged(js store.JobState) error {
	conv := h.jobConvergence(js, h.opts.Now())
	if js.Job.DesiredState == "stopped" && conv.Value == wire.ConvergenceInSync {
		return nil
	}
	e := httpapi.Conflict(CodeJobMustBeStopped, "the job must be stopped and converged first: set its desired state to stopped (with a savepoint) and wait for in_sync")
	e.Details = map[string]any{"desired_state": js.Job.DesiredState, "convergence": conv.Value}
	return e
}

// artifactInfos are the completed artifacts of a job as the restore choice
// sees them, and the savepoint taken at the stop that is the job's latest
// desired intent (nil: none).
func (h *Hub) artifactInfos(ctx context.Context, js store.JobState) ([]reconcile.ArtifactInfo, *reconcile.ArtifactInfo, error) {
	arts, err := h.st.ListArtifacts(ctx, js.Job.ID, "")
	if err != nil {
		return nil, nil, err
	}
	var out []reconcile.ArtifactInfo
	var atStop *reconcile.ArtifactInfo
	for _, a := range arts {
		if a.State != wire.ArtifactCompleted {
			continue
		}
		info := reconcile.ArtifactInfo{Kind: a.Kind, ID: a.ID, JobVersion: a.JobVersion, FormatVersion: a.FormatVersion,
			MaxParallelism: a.MaxParallelism, StatefulOperators: a.StatefulOperators, CompletedAt: a.CompletedAt.Time}
		out = append(out, info)
		if a.Kind == wire.ArtifactSavepoint && js.Latest != nil && a.OperationID == js.Latest.ID && atStop == nil {
			atStop = &info
		}
	}
	return out, atStop, nil
}

// restoreProblem answers a refused restore choice.
func restoreProblem(err error) error {
	var re *reconcile.RestoreError
	if !errors.As(err, &re) {
		return err
	}
	var e *httpapi.Error
	switch re.Code {
	case reconcile.CodeCheckpointNotFound:
		e = httpapi.NotFound(CodeCheckpointNotFound, re.Message)
	case reconcile.CodeStateFormatIncompatible:
		e = httpapi.Conflict(CodeStateFormatIncompatible, re.Message)
		e.Details = map[string]any{"field": re.Field, "have": re.Have, "want": re.Want}
	default:
		e = httpapi.Conflict(re.Code, re.Message)
	}
	return e
}

func (h *Hub) postUpgrade(w http.ResponseWriter, r *http.Request) error {
	var body wire.JobUpgradeRequest
	if err := httpapi.DecodeJSON(r, &body, MaxBodyBytes); err != nil {
		return err
	}
	var probs []httpapi.FieldProblem
	if !slices.Contains([]string{wire.UpgradeStateless, wire.UpgradeSavepoint, wire.UpgradeLastState}, body.Mode) {
		probs = append(probs, httpapi.FieldProblem{Path: "mode", Message: "must be stateless, savepoint or last_state"})
	}
	if body.DesiredState != "" && body.DesiredState != "running" && body.DesiredState != "stopped" {
		probs = append(probs, httpapi.FieldProblem{Path: "desired_state", Message: "must be running or stopped"})
	}
	if body.Savepoint != nil && body.Mode != wire.UpgradeSavepoint {
		probs = append(probs, httpapi.FieldProblem{Path: "savepoint_id", Message: "only with mode savepoint"})
	}
	if body.MaxAgeMS < 0 || (body.MaxAgeMS > 0 && body.Mode != wire.UpgradeLastState) {
		probs = append(probs, httpapi.FieldProblem{Path: "max_age_ms", Message: "a positive age, only with mode last_state"})
	}
	m, sp := h.materializeJob(body.Spec)
	probs = append(probs, sp...)
	ctx := r.Context()
	js, err := h.st.GetJobState(ctx, r.PathValue("id"))
	if err != nil {
		return jobProblem(err)
	}
	if m != nil && m.job.ID != js.Job.ID {
		probs = append(probs, httpapi.FieldProblem{Path: "spec.id", Message: "must be the job's id " + quote(js.Job.ID)})
	}
	if len(probs) > 0 {
		return httpapi.Validation(probs)
	}
	versions, err := h.st.JobVersions(ctx, js.Job.ID)
	if err != nil {
		return jobProblem(err)
	}
	if high := versions[len(versions)-1].Version; m.job.Version <= high {
		return httpapi.Validation([]httpapi.FieldProblem{{Path: "spec.version", Message: "must be greater than the job's highest version " + strconv.Itoa(high)}})
	}
	if err := h.stoppedAndConverged(js); err != nil {
		return err
	}
	arts, atStop, err := h.artifactInfos(ctx, js)
	if err != nil {
		return storeProblem(err)
	}
	choice, err := reconcile.ChooseRestore(reconcile.RestoreInput{Mode: body.Mode, Strict: body.Strict, Savepoint: body.Savepoint,
		MaxAge: time.Duration(body.MaxAgeMS) * time.Millisecond, Now: h.opts.Now(), StopSavepoint: atStop, Artifacts: arts,
		Target: reconcile.ShapeOf(m.plan)})
	if err != nil {
		return restoreProblem(err)
	}
	restore := &wire.JobRestore{Recovery: wire.RecoveryNone}
	up := &wire.JobUpgrade{UpgradeID: h.opts.NewID(), JobID: js.Job.ID, FromVersion: js.Job.Version, ToVersion: m.job.Version,
		Mode: body.Mode, Strict: body.Strict, Fallback: choice.Fallback, State: wire.UpgradeApplied}
	if a := choice.Restore; a != nil {
		up.Restore = &wire.ArtifactRef{Kind: a.Kind, ID: a.ID}
		restore = &wire.JobRestore{Recovery: wire.RecoveryArtifact, Artifact: up.Restore}
	}
	v := store.JobVersion{JobID: js.Job.ID, Version: m.job.Version, Spec: body.Spec, Plan: m.explain, UpgradeID: up.UpgradeID}
	jw := jobWrite{JobWrite: store.JobWrite{JobID: js.Job.ID, Action: ActionJobUpgrade, Version: v.Version, NewVersion: &v}, upgrade: up}
	return h.writeJob(w, r, h.withStart(jw, body.DesiredState, v, restore))
}

// withStart finishes an upgrade or rollback write: started at once
// (desired running) from restore, or left stopped with restore kept for
// the next start.
func (h *Hub) withStart(jw jobWrite, desired string, v store.JobVersion, restore *wire.JobRestore) jobWrite {
	jw.SetRestore = true
	if desired == "running" {
		jw.State, jw.Operation, jw.payload = "running", wire.CommandJobStart, startPayload(v, restore)
		return jw
	}
	jw.State, jw.Operation, jw.payload, jw.Restore = "stopped", wire.CommandJobStop, stopPayload(v.Version, false), restore
	return jw
}

func (h *Hub) postRollback(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		DesiredState string `json:"desired_state"`
	}
	if _, err := httpapi.DecodeOptionalJSON(r, &body, MaxBodyBytes); err != nil {
		return err
	}
	if body.DesiredState != "" && body.DesiredState != "running" && body.DesiredState != "stopped" {
		return httpapi.Validation([]httpapi.FieldProblem{{Path: "desired_state", Message: "must be running or stopped"}})
	}
	ctx := r.Context()
	js, err := h.st.GetJobState(ctx, r.PathValue("id"))
	if err != nil {
		return jobProblem(err)
	}
	up, err := h.st.GetUpgrade(ctx, js.Job.ID, r.PathValue("upgrade_id"))
	if errors.Is(err, store.ErrNotFound) {
		return httpapi.NotFound(httpapi.CodeNotFound, "the job has no upgrade with that id")
	}
	if err != nil {
		return storeProblem(err)
	}
	if up.State == wire.UpgradeRolledBack {
		return httpapi.Conflict(httpapi.CodeConflict, "that upgrade was already rolled back")
	}
	if js.Job.Version != up.ToVersion {
		return httpapi.Conflict(httpapi.CodeConflict, "the job no longer runs the version that upgrade made; roll back the newest upgrade first")
	}
	if err := h.stoppedAndConverged(js); err != nil {
		return err
	}
	prev, err := h.st.GetJobVersion(ctx, js.Job.ID, up.FromVersion)
	if err != nil {
		return storeProblem(err)
	}
	m, probs := h.materializeJob(prev.Spec)
	if len(probs) > 0 {
		return httpapi.Validation(probs)
	}
	arts, atStop, err := h.artifactInfos(ctx, js)
	if err != nil {
		return storeProblem(err)
	}
	// Back to the previous version from a compatible savepoint: the one
	// taken at this stop when the old version can read it, else the newest
	// the old version can read; a job whose old version keeps no state
	// starts empty when there is none.
	in := reconcile.RestoreInput{Mode: wire.UpgradeSavepoint, Now: h.opts.Now(), StopSavepoint: atStop, Artifacts: arts, Target: reconcile.ShapeOf(m.plan)}
	choice, err := reconcile.ChooseRestore(in)
	var re *reconcile.RestoreError
	if errors.As(err, &re) && re.Code == reconcile.CodeStateFormatIncompatible && atStop != nil {
		in.StopSavepoint = nil
		choice, err = reconcile.ChooseRestore(in)
	}
	restore := &wire.JobRestore{Recovery: wire.RecoveryNone}
	switch {
	case err == nil && choice.Restore != nil:
		restore = &wire.JobRestore{Recovery: wire.RecoveryArtifact, Artifact: &wire.ArtifactRef{Kind: choice.Restore.Kind, ID: choice.Restore.ID}}
	case errors.As(err, &re) && re.Code == reconcile.CodeCheckpointNotFound && len(statefulOperators(m.plan)) == 0:
	case err != nil:
		return restoreProblem(err)
	}
	jw := jobWrite{JobWrite: store.JobWrite{JobID: js.Job.ID, Action: ActionJobRollback, Version: up.FromVersion, RollBack: up.UpgradeID}}
	return h.writeJob(w, r, h.withStart(jw, body.DesiredState, prev, restore))
}

// postArtifact triggers a checkpoint or a savepoint of a running job as a
// one-shot command; its artifact record is pending until the node's result.
func (h *Hub) postArtifact(kind string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if _, err := httpapi.DecodeOptionalJSON(r, &struct{}{}, MaxBodyBytes); err != nil {
			return err
		}
		ctx := r.Context()
		js, err := h.st.GetJobState(ctx, r.PathValue("id"))
		if err != nil {
			return jobProblem(err)
		}
		if js.Job.DesiredState != "running" {
			return httpapi.Conflict(httpapi.CodeConflict, "the job is not desired running; a "+kind+" needs a running job")
		}
		var plan struct {
			FormatVersion     int `json:"format_version"`
			MaxParallelism    int `json:"max_parallelism"`
			StatefulOperators []struct {
				ID string `json:"id"`
			} `json:"stateful_operators"`
			Checkpoint json.RawMessage `json:"checkpoint"`
		}
		if err := json.Unmarshal(js.Version.Plan, &plan); err != nil {
			return err
		}
		if len(plan.Checkpoint) == 0 || string(plan.Checkpoint) == "null" {
			return httpapi.Conflict(httpapi.CodeConflict, "the job has no checkpoint configuration (checkpoint.object_store_uri): it cannot take a "+kind)
		}
		op := wire.CommandJobCheckpoint
		if kind == wire.ArtifactSavepoint {
			op = wire.CommandJobSavepoint
		}
		now := h.opts.Now()
		id := h.opts.NewID()
		art := &store.Artifact{JobID: js.Job.ID, Kind: kind, JobVersion: js.Job.Version, FormatVersion: plan.FormatVersion,
			MaxParallelism: plan.MaxParallelism, StatefulOperators: []string{}, State: wire.ArtifactPending,
			Trigger: wire.TriggerOperator, NodeID: js.Job.NodeID, OperationID: id, CreatedAt: wire.At(now)}
		for _, s := range plan.StatefulOperators {
			art.StatefulOperators = append(art.StatefulOperators, s.ID)
		}
		payload, err := json.Marshal(wire.CommandPayload{})
		if err != nil {
			return err
		}
		in, err := h.st.WriteJobCommand(ctx, store.JobCommandWrite{IntentID: id, Operation: op, JobID: js.Job.ID, NodeID: js.Job.NodeID,
			Generation: js.Job.Generation, Payload: payload, Artifact: art, CorrelationID: httpapi.CorrelationID(ctx),
			Actor: httpapi.Principal(ctx), Now: now, ExpiresAt: now.Add(h.opts.Settings.IntentTTL)})
		if err != nil {
			return h.storeFailed(err)
		}
		h.metrics.accepted.Inc()
		h.fleet.Mark(in.NodeID)
		h.nudge()
		w.Header().Set("Location", h.prefix+"/operations/"+in.ID)
		return httpapi.WriteJSON(w, http.StatusAccepted, wire.JobCommandResponse{OperationID: in.ID, IntentID: in.ID,
			NodeID: in.NodeID, JobID: js.Job.ID, Operation: op, Kind: kind, State: wire.ArtifactPending})
	}
}

func (h *Hub) getArtifacts(kind string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		page, size, err := httpapi.ParsePage(r)
		if err != nil {
			return err
		}
		state := r.URL.Query().Get("state")
		if state != "" && !slices.Contains([]string{wire.ArtifactPending, wire.ArtifactCompleted, wire.ArtifactFailed}, state) {
			return httpapi.BadRequest(httpapi.CodeInvalidQuery, "state must be pending, completed or failed")
		}
		ctx := r.Context()
		if _, err := h.st.GetJob(ctx, r.PathValue("id")); err != nil {
			return jobProblem(err)
		}
		arts, err := h.st.ListArtifacts(ctx, r.PathValue("id"), kind)
		if err != nil {
			return storeProblem(err)
		}
		if state != "" {
			arts = slices.DeleteFunc(arts, func(a store.Artifact) bool { return a.State != state })
		}
		return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(arts, page, size))
	}
}

func (h *Hub) getUpgrades(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if _, err := h.st.GetJob(ctx, r.PathValue("id")); err != nil {
		return jobProblem(err)
	}
	ups, err := h.st.Upgrades(ctx, r.PathValue("id"))
	if err != nil {
		return storeProblem(err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(ups, page, size))
}
