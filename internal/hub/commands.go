package hub

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// commandOf is the command an outbox row turns into (split: the job's
// split placement when the row is a split job's job_start, else nil).
func commandOf(e store.OutboxEntry, split *store.JobSplit, attemptID string, expires time.Time) wire.Command {
	return commandFromIntent(store.Intent{ID: e.IntentID, Operation: e.Operation, NodeID: e.NodeID, Kind: e.Kind,
		ResourceID: e.ResourceID, Generation: e.Generation, DesiredState: e.DesiredState, ConfigVersion: e.ConfigVersion,
		ActionID: e.ActionID, Payload: e.Payload}, split, attemptID, expires)
}

// commandFromIntent is the command of an intent's attempt. A job_start of
// a split job gets the job's split placement (task_nodes, node_data_ports,
// node_data_fingerprints and data_secret) here, at dispatch, from the jobs row: the secret is
// never part of the stored intent.
func commandFromIntent(i store.Intent, split *store.JobSplit, attemptID string, expires time.Time) wire.Command {
	if configKind(i.Kind) {
		// The arguments stored with the intent; the Hub adds the text of
		// the version and the secrets at dispatch (Hub.configCommand).
		var p wire.CommandPayload
		_ = json.Unmarshal(i.Payload, &p)
		return wire.Command{CommandID: i.ID, AttemptID: attemptID, Operation: i.Operation, NodeID: i.NodeID, ResourceID: i.ResourceID,
			Generation: i.Generation, ConfigVersion: i.ConfigVersion, ExpiresAt: wire.At(expires), Payload: p}
	}
	if jobKind(i.Kind) {
		var p wire.CommandPayload
		// The Hub wrote the payload itself; one it cannot read is sent empty
		// and the Agent refuses the command.
		_ = json.Unmarshal(i.Payload, &p)
		if split != nil && i.Kind == store.KindJob && i.Operation == wire.CommandJobStart {
			p.TaskNodes, p.NodeDataPorts, p.DataSecret = split.TaskNodes, split.NodeDataPorts, split.DataSecret
			p.NodeDataFingerprints = split.NodeDataFingerprints
		}
		return wire.Command{CommandID: i.ID, AttemptID: attemptID, Operation: i.Operation, NodeID: i.NodeID, ResourceID: i.ResourceID,
			Generation: i.Generation, ActionID: i.ActionID, ExpiresAt: wire.At(expires), Payload: p}
	}
	op := wire.CommandStreamDesiredState
	if i.ActionID != "" {
		op = wire.CommandStreamRestart
	}
	return wire.Command{CommandID: i.ID, AttemptID: attemptID, Operation: op, NodeID: i.NodeID, ResourceID: i.ResourceID,
		Generation: i.Generation, ActionID: i.ActionID, ConfigVersion: i.ConfigVersion, ExpiresAt: wire.At(expires),
		Payload: wire.CommandPayload{State: i.DesiredState}}
}

// splitsOf reads the split placements of the split jobs whose job_start
// intents are among kinds/ops/ids (parallel slices), by job id.
func (h *Hub) splitsOf(ctx context.Context, kinds, ops, jobIDs []string) (map[string]store.JobSplit, error) {
	var ids []string
	for i := range kinds {
		if kinds[i] == store.KindJob && ops[i] == wire.CommandJobStart && !slices.Contains(ids, jobIDs[i]) {
			ids = append(ids, jobIDs[i])
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return h.st.JobSplits(ctx, ids)
}

// splitFor is the split placement of a job among splits, or nil.
func splitFor(splits map[string]store.JobSplit, jobID string) *store.JobSplit {
	if sp, ok := splits[jobID]; ok {
		return &sp
	}
	return nil
}

// jobKind reports whether an intent kind is a job's (desired state or
// one-shot command).
func jobKind(kind string) bool { return kind == store.KindJob || kind == store.KindJobCommand }

// commandCapabilities is what a node must advertise to execute an
// intent's command.
func commandCapabilities(kind string) []string {
	if configKind(kind) {
		return []string{wire.CapabilityConfigControl}
	}
	if jobKind(kind) {
		return []string{wire.CapabilityJobControl}
	}
	return []string{wire.CapabilityStreamControl}
}
