package hub

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/wire"
)

// jobResource is a job's desired state as the resource its node holds:
// what convergence and operation records look at.
func jobResource(js store.JobState) store.ResourceState {
	return store.ResourceState{Resource: store.Resource{NodeID: js.Job.NodeID, Kind: store.KindJob, ResourceID: js.Job.ID,
		State: js.Job.DesiredState, ConfigVersion: strconv.Itoa(js.Job.Version), Generation: js.Job.Generation,
		ActionID: js.Job.ActionID, UpdatedAt: js.Job.UpdatedAt}, Latest: js.Latest, ObservedJob: js.Observed}
}

// peerResource is a split job's desired state as one of its other nodes
// holds it (the same desired state, generation and version: every write
// sets them at each node).
func peerResource(js store.JobState, p store.JobPeer) store.ResourceState {
	rs := jobResource(js)
	rs.NodeID, rs.Latest, rs.ObservedJob = p.NodeID, p.Latest, p.Observed
	return rs
}

// convergenceRank orders convergence values from best to worst.
var convergenceRank = map[string]int{wire.ConvergenceInSync: 0, wire.ConvergenceApplying: 1, wire.ConvergencePending: 2,
	wire.ConvergenceUnknown: 3, wire.ConvergenceDegraded: 4, wire.ConvergenceBlocked: 5}

// jobConvergence is the one convergence rule applied to a job.
func (h *Hub) jobConvergence(js store.JobState, now time.Time) reconcile.Result {
	r, _ := h.jobConvergenceAt(js, now)
	return r
}

// jobConvergenceAt is a job's convergence and the node it is measured at:
// its node's, or for a split job the worst of its nodes' (in_sync only
// when every node is), the coordinator's among equals.
func (h *Hub) jobConvergenceAt(js store.JobState, now time.Time) (reconcile.Result, string) {
	worst, node := h.convergenceOf(jobResource(js), now), js.Job.NodeID
	for _, p := range js.Peers {
		if r := h.convergenceOf(peerResource(js, p), now); convergenceRank[r.Value] > convergenceRank[worst.Value] {
			worst, node = r, p.NodeID
		}
	}
	return worst, node
}

// jobView is the desired, observed and convergence views of a job.
func (h *Hub) jobView(js store.JobState, now time.Time) wire.Job {
	j := js.Job
	conv, convNode := h.jobConvergenceAt(js, now)
	v := wire.Job{
		ID: j.ID, NodeID: j.NodeID, Version: j.Version,
		Placement:   jobPlacement(j),
		Desired:     wire.JobDesired{State: j.DesiredState, Generation: j.Generation, Version: j.Version, ActionID: j.ActionID, Restore: j.Restore},
		Convergence: conv.Value, ConvergenceReason: conv.Reason,
		CreatedAt: wire.At(j.CreatedAt), UpdatedAt: wire.At(j.UpdatedAt),
	}
	if j.Placement == wire.PlacementSplit && conv.Value != wire.ConvergenceInSync {
		v.ConvergenceNode = convNode
	}
	if o := js.Observed; o != nil {
		v.Observed = h.jobObserved(*o)
	}
	if js.Latest != nil {
		rs := jobResource(js)
		op := h.operationOf(*js.Latest, &rs, now)
		op.Observed = nil // the view holds the observation itself
		v.LatestOperation = &op
	}
	return v
}

// jobPlacement is the placement view of a job.
func jobPlacement(j store.Job) wire.JobPlacement {
	p := wire.JobPlacement{NodeID: j.NodeID, Mode: wire.PlacementColocated, Strategy: j.Strategy, Requested: j.Requested}
	if j.Placement == wire.PlacementSplit {
		p.Mode, p.Nodes, p.TaskNodes = wire.PlacementSplit, j.Nodes(), j.TaskNodes
	}
	return p
}

// observation is the wire form of a stored job observation.
func observation(o store.ObservedJob) wire.JobObservation {
	var d wire.JobObservation
	_ = json.Unmarshal(o.Detail, &d) // written by the Hub from a decoded body
	d.ID, d.State, d.Generation, d.Version, d.ActionID = o.JobID, o.State, o.Generation, o.Version, o.ActionID
	d.LastError, d.LastErrorAt = o.LastError, wire.At(o.LastErrorAt)
	return d
}

// jobObserved is the observed view of a job: its node's latest accepted
// observation, stale when the node's observations no longer are current.
func (h *Hub) jobObserved(o store.ObservedJob) wire.JobObserved {
	d := observation(o)
	v := wire.JobObserved{State: d.State, Generation: d.Generation, Version: d.Version, ActionID: d.ActionID,
		LastError: d.LastError, LastErrorAt: d.LastErrorAt, WatermarkLagMS: d.WatermarkLagMS,
		CheckpointDurationMS: d.CheckpointDurationMS, CheckpointFailures: d.CheckpointFailures, LastCheckpoint: d.LastCheckpoint,
		StateBytes: d.StateBytes, Restarts: d.Restarts, RestoredFrom: d.RestoredFrom, ReportedAt: wire.At(o.UpdatedAt)}
	v.Stale = !h.fleet.Observing(o.NodeID)
	return v
}

// getJobs lists the jobs by id. Filters: node_id, convergence,
// desired_state.
func (h *Hub) getJobs(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	states, err := h.st.JobStates(r.Context())
	if err != nil {
		return problemFor(err, anyResource)
	}
	now := h.opts.Now()
	out := make([]wire.Job, 0, len(states))
	for _, js := range states {
		v := h.jobView(js, now)
		if (q.Get("node_id") != "" && v.NodeID != q.Get("node_id") && !slices.Contains(v.Placement.Nodes, q.Get("node_id"))) || (q.Get("convergence") != "" && v.Convergence != q.Get("convergence")) ||
			(q.Get("desired_state") != "" && v.Desired.State != q.Get("desired_state")) ||
			!mayRead(r.Context(), access.Resource{Job: v.ID}) {
			continue
		}
		out = append(out, v)
	}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(out, page, size))
}

func (h *Hub) getJob(w http.ResponseWriter, r *http.Request) error {
	js, err := h.st.GetJobState(r.Context(), r.PathValue("id"))
	if err != nil {
		return problemFor(err, aJob)
	}
	w.Header().Set("ETag", httpapi.ETag(js.Job.Generation))
	return httpapi.WriteJSON(w, http.StatusOK, h.jobView(js, h.opts.Now()))
}

// getJobDetail is the job with its assignment (every task of the current
// version's plan on its node, the job's or, split, the task's own, merged
// with that node's observation of it, or marked not observed) and its
// measured gauges (the job's node's: a split job's coordinator's).
func (h *Hub) getJobDetail(w http.ResponseWriter, r *http.Request) error {
	js, err := h.st.GetJobState(r.Context(), r.PathValue("id"))
	if err != nil {
		return problemFor(err, aJob)
	}
	var plan job.Explanation
	if err := json.Unmarshal(js.Version.Plan, &plan); err != nil {
		return err
	}
	d := wire.JobDetail{Job: h.jobView(js, h.opts.Now()), Assignment: []wire.JobTaskAssignment{}}
	// observed[node][task]: each task is merged from its own node's
	// observation, and only an observation of the current version
	// describes its tasks. The gauges are the coordinator's.
	observed := map[string]map[string]wire.JobTask{}
	add := func(o *store.ObservedJob) *wire.JobObservation {
		if o == nil || o.Version != js.Job.Version {
			return nil
		}
		obs := observation(*o)
		observed[o.NodeID] = map[string]wire.JobTask{}
		for _, t := range obs.Tasks {
			observed[o.NodeID][t.ID] = t
		}
		return &obs
	}
	if obs := add(js.Observed); obs != nil {
		d.WatermarkLagMS, d.CheckpointDurationMS, d.CheckpointFailures = &obs.WatermarkLagMS, &obs.CheckpointDurationMS, &obs.CheckpointFailures
	}
	for _, p := range js.Peers {
		add(p.Observed)
	}
	statefulChain := map[string]bool{}
	for _, s := range plan.StatefulOperators {
		statefulChain[s.ID] = true
	}
	for _, c := range plan.Chains {
		keyed := slices.ContainsFunc(c.Operators, func(id string) bool { return statefulChain[id] })
		for _, t := range c.Tasks {
			node := js.Job.NodeID
			if n, ok := js.Job.TaskNodes[t.ID]; ok && js.Job.Placement == wire.PlacementSplit {
				node = n
			}
			a := wire.JobTaskAssignment{TaskID: t.ID, NodeID: node, Operators: c.Operators, Subtask: t.Subtask, State: wire.TaskNotObserved}
			if keyed {
				a.KeyGroups = []int{t.KeyGroups.Start, t.KeyGroups.End}
			}
			if ot, ok := observed[node][t.ID]; ok {
				a.Observed, a.State, a.Watermark, a.RecordsIn, a.RecordsOut = true, ot.State, ot.Watermark, ot.RecordsIn, ot.RecordsOut
				d.TasksObserved++
			}
			d.Assignment = append(d.Assignment, a)
		}
	}
	d.TasksTotal = len(d.Assignment)
	w.Header().Set("ETag", httpapi.ETag(js.Job.Generation))
	return httpapi.WriteJSON(w, http.StatusOK, d)
}

func (h *Hub) getJobVersions(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	j, err := h.st.GetJob(ctx, r.PathValue("id"))
	if err != nil {
		return problemFor(err, aJob)
	}
	vs, err := h.st.JobVersions(ctx, j.ID)
	if err != nil {
		return problemFor(err, aJob)
	}
	out := make([]wire.JobVersion, 0, len(vs))
	for i := len(vs) - 1; i >= 0; i-- { // newest first
		v := vs[i]
		out = append(out, wire.JobVersion{Version: v.Version, Current: v.Version == j.Version, UpgradeID: v.UpgradeID,
			CreatedAt: wire.At(v.CreatedAt), Spec: v.Spec})
	}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(out, page, size))
}

// getJobPlan serves the kernel's plan explanation of the current version,
// or of ?version=N, unchanged.
func (h *Hub) getJobPlan(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	j, err := h.st.GetJob(ctx, r.PathValue("id"))
	if err != nil {
		return problemFor(err, aJob)
	}
	version := j.Version
	if s := r.URL.Query().Get("version"); s != "" {
		if version, err = strconv.Atoi(s); err != nil || version < 1 {
			return httpapi.BadRequest(httpapi.CodeInvalidQuery, "version must be a positive integer")
		}
	}
	v, err := h.st.GetJobVersion(ctx, j.ID, version)
	if err != nil {
		if version != j.Version {
			return httpapi.NotFound(httpapi.CodeNotFound, "the job has no version "+strconv.Itoa(version))
		}
		return problemFor(err, anyResource)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(v.Plan)
	return err
}
