package node

import (
	"net/http"
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/wire"
)

// jobStartBody is the optional body of POST /jobs/{id}/start and
// /restart: the recovery mode of this start (empty: the job's own).
type jobStartBody struct {
	Recovery string `json:"recovery,omitempty"`
}

// jobStopBody is the optional body of POST /jobs/{id}/stop: a savepoint
// taken before the job stops.
type jobStopBody struct {
	Savepoint bool `json:"savepoint,omitempty"`
}

func (s *server) getJobs(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(s.n.Jobs(), page, size))
}

func (s *server) getJob(w http.ResponseWriter, r *http.Request) error {
	v, err := s.n.Job(r.PathValue("id"))
	if err != nil {
		return s.problem(err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, v)
}

func (s *server) getJobPlan(w http.ResponseWriter, r *http.Request) error {
	x, err := s.n.JobPlan(r.PathValue("id"))
	if err != nil {
		return s.problem(err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, x)
}

func (s *server) getJobArtifacts(kind string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		page, size, err := httpapi.ParsePage(r)
		if err != nil {
			return err
		}
		arts, err := s.n.JobArtifacts(r.Context(), r.PathValue("id"), kind)
		if err != nil {
			return s.problem(err)
		}
		return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(arts, page, size))
	}
}

// postJobAction accepts a job action. Its body is optional (a bodiless
// curl -X POST works); one that is sent must be a JSON object of the
// action's fields.
func (s *server) postJobAction(action string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var args JobArgs
		switch action {
		case OpJobStart, OpJobRestart:
			var b jobStartBody
			if _, err := httpapi.DecodeOptionalJSON(r, &b, MaxBodyBytes); err != nil {
				return err
			}
			if b.Recovery != "" && !slices.Contains(recoveryModes, b.Recovery) {
				return httpapi.Validation([]httpapi.FieldProblem{{Path: "recovery", Message: "must be one of " + strings.Join(recoveryModes, ", ")}})
			}
			args.Recovery = b.Recovery
		case OpJobStop:
			var b jobStopBody
			if _, err := httpapi.DecodeOptionalJSON(r, &b, MaxBodyBytes); err != nil {
				return err
			}
			args.Savepoint = b.Savepoint
		default:
			if _, err := httpapi.DecodeOptionalJSON(r, &struct{}{}, MaxBodyBytes); err != nil {
				return err
			}
		}
		id := r.PathValue("id")
		rec, err := s.n.JobAction(id, action, args, s.request(r))
		if err != nil {
			return s.problem(err)
		}
		return s.accepted(w, rec)
	}
}

// jobRoutes are the job routes of the Node API's table.
func (s *server) jobRoutes() []httpapi.Route {
	write := func(summary string, body any) httpapi.Doc {
		return httpapi.Doc{Summary: summary, Tag: tagJobs, Request: body, RequestOptional: true, Status: http.StatusAccepted,
			Response: wire.Operation{}, Location: true, Problems: []int{http.StatusNotFound, http.StatusConflict}}
	}
	artifacts := func(kind string) httpapi.Doc {
		return httpapi.Doc{Summary: "The job's completed " + kind + "s, newest first", Tag: tagJobs, Paged: true,
			Response: wire.Page[wire.JobArtifact]{}, Problems: []int{http.StatusNotFound}}
	}
	return []httpapi.Route{
		{Method: "GET", Pattern: "/jobs", Handler: s.getJobs, Doc: httpapi.Doc{Summary: "The jobs", Tag: tagJobs, Paged: true, Response: wire.Page[JobView]{}}},
		{Method: "GET", Pattern: "/jobs/{id}", Handler: s.getJob, Doc: httpapi.Doc{Summary: "One job: state, tasks, records, watermark lag, checkpoints, restarts, last error",
			Tag: tagJobs, Response: JobView{}, Problems: []int{http.StatusNotFound}}},
		{Method: "GET", Pattern: "/jobs/{id}/tap", Handler: s.getJobTap, Doc: tapDoc(TapJob, "operator")},
		{Method: "GET", Pattern: "/jobs/{id}/plan", Handler: s.getJobPlan, Doc: httpapi.Doc{Summary: "The job's plan explained", Tag: tagJobs,
			Response: engine.JobExplanation{}, Problems: []int{http.StatusNotFound}}},
		{Method: "GET", Pattern: "/jobs/{id}/checkpoints", Handler: s.getJobArtifacts(wire.ArtifactCheckpoint), Doc: artifacts(wire.ArtifactCheckpoint)},
		{Method: "POST", Pattern: "/jobs/{id}/checkpoints", Handler: s.postJobAction(OpJobCheckpoint), Doc: write("Take a checkpoint of a running job", struct{}{})},
		{Method: "GET", Pattern: "/jobs/{id}/savepoints", Handler: s.getJobArtifacts(wire.ArtifactSavepoint), Doc: artifacts(wire.ArtifactSavepoint)},
		{Method: "POST", Pattern: "/jobs/{id}/savepoints", Handler: s.postJobAction(OpJobSavepoint), Doc: write("Take a savepoint of a running job", struct{}{})},
		{Method: "POST", Pattern: "/jobs/{id}/start", Handler: s.postJobAction(OpJobStart), Doc: write("Start a job, optionally from a recovery mode", jobStartBody{})},
		{Method: "POST", Pattern: "/jobs/{id}/stop", Handler: s.postJobAction(OpJobStop), Doc: write("Stop a job, optionally with a savepoint first", jobStopBody{})},
		{Method: "POST", Pattern: "/jobs/{id}/restart", Handler: s.postJobAction(OpJobRestart), Doc: write("Stop a job and start it again", jobStartBody{})},
	}
}
