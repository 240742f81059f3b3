package hub

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

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

// Audit actions of the job routes beyond "job_<action>" of the actions
// (jobAction).
const (
	ActionJobCreate   = "job_create"
	ActionJobUpgrade  = "job_upgrade"
	ActionJobRollback = "job_rollback"
	// ActionJobValidate names a refused POST /jobs/validate (a forbidden
	// one, or a spec that is not valid).
	ActionJobValidate = "job_validate"
	// actionJobDesired names a rejected PUT desired-state whose state is
	// neither running nor stopped; the others are job_start and job_stop.
	actionJobDesired = "job_desired_state"
)

// jobActions are the one-shot actions of POST /jobs/{id}/actions/<action>,
// one route each.
var jobActions = []string{"start", "stop", "restart", "move"}

// maxNodeIDs bounds node_ids in job bodies.
const maxNodeIDs = 64

func (h *Hub) jobRoutes(p string) []httpapi.Route {
	write := func(summary string, body any, optional bool) httpapi.Doc {
		return httpapi.Doc{Summary: summary, Tag: tagJobs, Request: body, RequestOptional: optional, Status: http.StatusAccepted,
			Response: wire.JobDesiredResponse{}, ETag: true, Location: true, IfMatch: true,
			Problems: []int{http.StatusNotFound, http.StatusConflict}}
	}
	artifacts := func(kind string) httpapi.Doc {
		return httpapi.Doc{Summary: "The job's " + kind + "s", Tag: tagJobs, Paged: true,
			Query:    []httpapi.Param{{Name: "state", Enum: []string{wire.ArtifactPending, wire.ArtifactCompleted, wire.ArtifactFailed, wire.ArtifactPruned}}},
			Response: wire.Page[wire.JobArtifact]{}, Problems: []int{http.StatusNotFound}}
	}
	take := func(kind string) httpapi.Doc {
		return httpapi.Doc{Summary: "Take a " + kind + " of a running job", Tag: tagJobs, Request: struct{}{}, RequestOptional: true,
			Status: http.StatusAccepted, Response: wire.JobCommandResponse{}, Location: true, Problems: []int{http.StatusNotFound, http.StatusConflict}}
	}
	view := func(summary string, resp any) httpapi.Doc {
		return httpapi.Doc{Summary: summary, Tag: tagJobs, Response: resp, ETag: true, Problems: []int{http.StatusNotFound}}
	}
	routes := []httpapi.Route{
		{Method: "POST", Pattern: p + "/jobs", Handler: h.auditedAs(store.KindJob, fixedAction(ActionJobCreate), h.postJob),
			Doc: write("Create a job and place it", wire.JobCreateRequest{}, false)},
		{Method: "POST", Pattern: p + "/jobs/validate", Handler: h.auditedAs(store.KindJob, fixedAction(ActionJobValidate), h.postJobValidate), Doc: httpapi.Doc{Summary: "Validate a job spec against nodes, creating no job",
			Tag: tagJobs, Request: wire.JobValidateRequest{}, Response: wire.JobValidateResponse{}}},
		{Method: "GET", Pattern: p + "/jobs", Handler: h.getJobs, Doc: httpapi.Doc{Summary: "The jobs, by id", Tag: tagJobs, Paged: true,
			Query:    []httpapi.Param{{Name: "node_id"}, {Name: "convergence"}, {Name: "desired_state", Enum: []string{"running", "stopped"}}},
			Response: wire.Page[wire.Job]{}}},
		{Method: "GET", Pattern: p + "/jobs/{id}", Handler: h.getJob, Doc: view("One job: desired, observed, convergence", wire.Job{})},
		{Method: "GET", Pattern: p + "/jobs/{id}/status", Handler: h.getJob, Doc: view("One job (alias of /jobs/{id})", wire.Job{})},
		{Method: "GET", Pattern: p + "/jobs/{id}/detail", Handler: h.getJobDetail, Doc: view("One job with its task assignment and gauges", wire.JobDetail{})},
		{Method: "GET", Pattern: p + "/jobs/{id}/versions", Handler: h.getJobVersions, Doc: httpapi.Doc{Summary: "The job's versions, newest first",
			Tag: tagJobs, Paged: true, Response: wire.Page[wire.JobVersion]{}, Problems: []int{http.StatusNotFound}}},
		{Method: "GET", Pattern: p + "/jobs/{id}/plan", Handler: h.getJobPlan, Doc: httpapi.Doc{Summary: "The kernel's plan explanation of a version",
			Tag: tagJobs, Query: []httpapi.Param{{Name: "version", Type: "integer", Description: "Default the current version."}},
			Response: json.RawMessage{}, Problems: []int{http.StatusNotFound}}},
		{Method: "PUT", Pattern: p + "/jobs/{id}/desired-state", Handler: h.auditedAs(store.KindJob, jobAction(actionJobDesired), h.putJobDesired),
			Doc: write("Set a job's desired state", wire.JobDesiredRequest{}, false)},
		{Method: "GET", Pattern: p + "/jobs/{id}/checkpoints", Handler: h.getArtifacts(wire.ArtifactCheckpoint), Doc: artifacts(wire.ArtifactCheckpoint)},
		{Method: "POST", Pattern: p + "/jobs/{id}/checkpoints", Handler: h.auditedAs(store.KindJob, fixedAction(wire.CommandJobCheckpoint), h.postArtifact(wire.ArtifactCheckpoint)),
			Doc: take(wire.ArtifactCheckpoint)},
		{Method: "GET", Pattern: p + "/jobs/{id}/savepoints", Handler: h.getArtifacts(wire.ArtifactSavepoint), Doc: artifacts(wire.ArtifactSavepoint)},
		{Method: "POST", Pattern: p + "/jobs/{id}/savepoints", Handler: h.auditedAs(store.KindJob, fixedAction(wire.CommandJobSavepoint), h.postArtifact(wire.ArtifactSavepoint)),
			Doc: take(wire.ArtifactSavepoint)},
		{Method: "GET", Pattern: p + "/jobs/{id}/upgrades", Handler: h.getUpgrades, Doc: httpapi.Doc{Summary: "The job's upgrades", Tag: tagJobs, Paged: true,
			Response: wire.Page[wire.JobUpgrade]{}, Problems: []int{http.StatusNotFound}}},
		{Method: "POST", Pattern: p + "/jobs/{id}/upgrades", Handler: h.auditedAs(store.KindJob, fixedAction(ActionJobUpgrade), h.postUpgrade),
			Doc: write("Upgrade a stopped job to a new version", wire.JobUpgradeRequest{}, false)},
		{Method: "POST", Pattern: p + "/jobs/{id}/upgrades/{upgrade_id}/rollback", Handler: h.auditedAs(store.KindJob, fixedAction(ActionJobRollback), h.postRollback),
			Doc: write("Roll an upgrade back to the previous version", jobRollbackRequest{}, true)},
	}
	for _, a := range jobActions {
		var body any = struct{}{}
		if a == "move" {
			body = wire.JobMoveRequest{}
		}
		routes = append(routes, httpapi.Route{Method: "POST", Pattern: p + "/jobs/{id}/actions/" + a,
			Handler: h.auditedAs(store.KindJob, fixedAction("job_"+a), h.postJobAction(a)), Doc: write(titled(a)+" a job", body, true)})
	}
	return routes
}

// jobRollbackRequest is the optional body of an upgrade's rollback.
type jobRollbackRequest struct {
	DesiredState string `json:"desired_state,omitempty"`
}

// jobAction is the audit action of a route whose path value "action" names
// one of jobActions: "job_<action>", else fallback. PUT desired-state
// records start or stop there from the body's state.
func jobAction(fallback string) auditAction {
	return func(r *http.Request) string {
		if a := r.PathValue("action"); slices.Contains(jobActions, a) {
			return "job_" + a
		}
		return fallback
	}
}

// jobWrite is one job mutation as the handlers build it; writeJob fills in
// the ids, times, principal and audit action.
type jobWrite struct {
	store.JobWrite
	payload wire.CommandPayload
	upgrade *wire.JobUpgrade
}

// writeJob writes a job mutation through the intent pipeline. The answer
// names the job's node; its peers of a split job and the nodes a move
// fences are marked for dispatch too.
func (h *Hub) writeJob(w http.ResponseWriter, r *http.Request, jw jobWrite) error {
	payload, err := json.Marshal(jw.payload)
	if err != nil {
		return err
	}
	return h.accept(w, r, intentWrite{about: aJob, conditional: true, conflict: map[string]any{"job_id": jw.JobID},
		commit: func(ctx context.Context, m intentMeta) (committed, error) {
			jw.IntentID, jw.IfMatch, jw.Payload, jw.NewIntentID = m.id, m.ifMatch, payload, h.opts.NewID
			jw.Spread = placement.Spread
			if jw.upgrade != nil {
				jw.upgrade.OperationID, jw.upgrade.CreatedAt = m.id, wire.At(m.now)
				jw.Upgrade = jw.upgrade
			}
			if jw.NodeID != "" && jw.FenceIntentID == "" {
				jw.FenceIntentID = h.opts.NewID()
			}
			jw.Action, jw.CorrelationID, jw.Actor, jw.ActorKind, jw.Now, jw.ExpiresAt = m.action, m.correlationID, m.by.id, m.by.kind, m.now, m.expiresAt
			res, err := h.st.WriteJob(ctx, jw.JobWrite)
			if err != nil {
				return committed{}, err
			}
			nodes := []string{res.Intent.NodeID}
			for _, in := range append(slices.Clone(res.Peers), res.Fences...) {
				nodes = append(nodes, in.NodeID)
			}
			version, _ := strconv.Atoi(res.Intent.ConfigVersion)
			return committed{operationID: res.Intent.ID, nodes: nodes, etag: httpapi.ETag(res.Generation),
				converge: func() {
					for _, n := range nodes {
						h.converge(n, jw.JobID)
					}
				},
				body: func(status string) any {
					return wire.JobDesiredResponse{
						OperationID: res.Intent.ID, IntentID: res.Intent.ID, NodeID: nodes[0], JobID: jw.JobID, Generation: res.Generation,
						DesiredState: res.Intent.DesiredState, Version: version, ActionID: res.Intent.ActionID,
						Convergence: wire.ConvergencePending, NodeStatus: status, Upgrade: jw.Upgrade, Warnings: nodeWarnings(status),
					}
				}}, nil
		}})
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
	jw := jobWrite{JobWrite: store.JobWrite{JobID: m.job.ID, State: body.DesiredState,
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

func (h *Hub) putJobDesired(w http.ResponseWriter, r *http.Request) error {
	var body wire.JobDesiredRequest
	if err := httpapi.DecodeJSON(r, &body, MaxBodyBytes); err != nil {
		return err
	}
	// The state names the route's audit action, accepted or rejected.
	switch body.State {
	case "running":
		r.SetPathValue("action", "start")
	case "stopped":
		r.SetPathValue("action", "stop")
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
		return problemFor(err, aJob)
	}
	jw := jobWrite{JobWrite: store.JobWrite{JobID: js.Job.ID, State: body.State}}
	if body.State == "running" {
		restore := js.Job.Restore
		if body.Recovery != "" {
			restore = &wire.JobRestore{Recovery: body.Recovery}
		}
		jw.Operation, jw.payload = wire.CommandJobStart, startPayload(js.Version, restore)
		jw.SetRestore = true // a start consumes the restore choice
	} else {
		jw.Operation, jw.payload = wire.CommandJobStop, stopPayload(js.Job.Version, body.Savepoint)
	}
	return h.writeJob(w, r, jw)
}

// postJobAction is POST /jobs/{id}/actions/<action>: start, stop, restart
// or move.
func (h *Hub) postJobAction(action string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		return h.jobActionOf(w, r, action)
	}
}

func (h *Hub) jobActionOf(w http.ResponseWriter, r *http.Request, action string) error {
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
		return problemFor(err, aJob)
	}
	jw := jobWrite{JobWrite: store.JobWrite{JobID: js.Job.ID}}
	switch action {
	case "start":
		jw.Operation, jw.State = wire.CommandJobStart, "running"
		jw.payload, jw.SetRestore = startPayload(js.Version, js.Job.Restore), true
	case "stop":
		jw.Operation, jw.State, jw.payload = wire.CommandJobStop, "stopped", stopPayload(js.Job.Version, false)
	case "restart":
		jw.Operation, jw.State, jw.ActionID = wire.CommandJobStart, "running", h.opts.NewID()
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
			return problemFor(err, anyResource)
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
	jw.State = js.Job.DesiredState
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
