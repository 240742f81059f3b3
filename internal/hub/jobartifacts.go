package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

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
			return problemFor(err, aJob)
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
		payload, err := json.Marshal(wire.CommandPayload{})
		if err != nil {
			return err
		}
		return h.accept(w, r, intentWrite{about: aJob, commit: func(ctx context.Context, m intentMeta) (committed, error) {
			art := &store.Artifact{JobID: js.Job.ID, Kind: kind, JobVersion: js.Job.Version, FormatVersion: plan.FormatVersion,
				MaxParallelism: plan.MaxParallelism, StatefulOperators: []string{}, State: wire.ArtifactPending,
				Trigger: wire.TriggerOperator, NodeID: js.Job.NodeID, OperationID: m.id, CreatedAt: wire.At(m.now)}
			for _, s := range plan.StatefulOperators {
				art.StatefulOperators = append(art.StatefulOperators, s.ID)
			}
			in, err := h.st.WriteJobCommand(ctx, store.JobCommandWrite{IntentID: m.id, Operation: op, JobID: js.Job.ID, NodeID: js.Job.NodeID,
				Generation: js.Job.Generation, Payload: payload, Artifact: art, CorrelationID: m.correlationID,
				Actor: m.by.id, ActorKind: m.by.kind, Now: m.now, ExpiresAt: m.expiresAt})
			if err != nil {
				return committed{}, err
			}
			return committed{operationID: in.ID, nodes: []string{in.NodeID}, body: func(string) any {
				return wire.JobCommandResponse{OperationID: in.ID, IntentID: in.ID,
					NodeID: in.NodeID, JobID: js.Job.ID, Operation: op, Kind: kind, State: wire.ArtifactPending}
			}}, nil
		}})
	}
}

func (h *Hub) getArtifacts(kind string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		page, size, err := httpapi.ParsePage(r)
		if err != nil {
			return err
		}
		state := r.URL.Query().Get("state")
		if state != "" && !slices.Contains([]string{wire.ArtifactPending, wire.ArtifactCompleted, wire.ArtifactFailed, wire.ArtifactPruned}, state) {
			return httpapi.BadRequest(httpapi.CodeInvalidQuery, "state must be pending, completed, failed or pruned")
		}
		ctx := r.Context()
		job, err := h.st.GetJob(ctx, r.PathValue("id"))
		if err != nil {
			return problemFor(err, aJob)
		}
		arts, err := h.st.ListArtifacts(ctx, r.PathValue("id"), kind)
		if err != nil {
			return problemFor(err, anyResource)
		}
		if kind == wire.ArtifactCheckpoint {
			if err := h.markPruned(ctx, job, arts); err != nil {
				return problemFor(err, anyResource)
			}
		}
		if state != "" {
			arts = slices.DeleteFunc(arts, func(a store.Artifact) bool { return a.State != state })
		}
		return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(arts, page, size))
	}
}

// defaultRetention is checkpoint.retention when a spec leaves it out
// (internal/config's default).
const defaultRetention = 3

// markPruned marks pruned the completed checkpoints of arts (newest first)
// past the newest checkpoint.retention of the job's current spec: the node
// deleted them, so they are no longer restorable and their location is
// dead. A spec without checkpoints leaves arts as they are.
func (h *Hub) markPruned(ctx context.Context, job store.Job, arts []store.Artifact) error {
	v, err := h.st.GetJobVersion(ctx, job.ID, job.Version)
	if err != nil {
		return err
	}
	var spec struct {
		Checkpoint *struct {
			Retention int `json:"retention"`
		} `json:"checkpoint"`
	}
	if json.Unmarshal(v.Spec, &spec) != nil || spec.Checkpoint == nil {
		return nil
	}
	keep := spec.Checkpoint.Retention
	if keep <= 0 {
		keep = defaultRetention
	}
	for i := range arts {
		if arts[i].State != wire.ArtifactCompleted || arts[i].ID == 0 {
			continue
		}
		if keep > 0 {
			keep--
			continue
		}
		arts[i].State = wire.ArtifactPruned
	}
	return nil
}
