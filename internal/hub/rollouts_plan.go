package hub

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/rollout"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// Bounds of a rollout body (docs/rollouts.md "The body").
const (
	maxRolloutNodes      = 10000
	defaultGateTimeoutMS = 120000
	minGateTimeoutMS     = 1000
	maxRolloutMS         = 86400000 // 24 h: gate timeout, soak and pause
)

// planRollout checks a create body and returns the rollout it describes
// (its plan and document; no id, nodes, state or times yet). Field problems are one 422
// validation_failed; a config_version the source node does not have is a
// 404. The configuration's ${secret:} references are resolved once here,
// and the values dropped: one the Hub cannot resolve is a 422 now rather
// than a failed intent per node later.
func (h *Hub) planRollout(ctx context.Context, b wire.RolloutCreateRequest) (store.Rollout, error) {
	var ro store.Rollout
	probs := checkRolloutSource(b)
	ids, nprobs := h.checkRolloutNodes(b.NodeIDs)
	probs = append(probs, nprobs...)
	plan, pprobs := checkRolloutPlan(b, ids)
	probs = append(probs, pprobs...)
	if len(probs) > 0 {
		return ro, httpapi.Validation(probs)
	}
	ro.Plan = plan
	secretsPath := "configuration.content"
	if b.Configuration != nil {
		ro.Format, ro.Content = b.Configuration.Format, b.Configuration.Content
	} else {
		v, err := h.st.GetConfigVersion(ctx, b.SourceNodeID, b.ConfigVersion)
		if errors.Is(err, store.ErrNotFound) {
			e := httpapi.NotFound(CodeConfigVersionNotFound, "node "+quote(b.SourceNodeID)+" has no configuration version "+quote(b.ConfigVersion))
			e.Details = map[string]any{"source_node_id": b.SourceNodeID, "config_version": b.ConfigVersion}
			return ro, e
		}
		if err != nil {
			return ro, h.storeFailed(err)
		}
		ro.Format, ro.Content = v.Format, v.Content
		ro.ConfigVersion, ro.SourceNodeID = v.Version, v.NodeID
		secretsPath = "config_version"
	}
	if _, err := h.hubSecrets(ro.Format, ro.Content); err != nil {
		// The error names paths and references, never a value.
		return ro, httpapi.Validation([]httpapi.FieldProblem{{Path: secretsPath, Message: err.Error()}})
	}
	ro.SHA256 = configDocSHA(ro.Content)
	return ro, nil
}

// checkRolloutSource checks that exactly one of configuration and
// config_version (with source_node_id) is given, and the document.
func checkRolloutSource(b wire.RolloutCreateRequest) []httpapi.FieldProblem {
	var probs []httpapi.FieldProblem
	switch {
	case b.Configuration != nil && b.ConfigVersion != "":
		return []httpapi.FieldProblem{{Path: "configuration", Message: "exactly one of configuration and config_version"}}
	case b.Configuration == nil && b.ConfigVersion == "":
		return []httpapi.FieldProblem{{Path: "configuration", Message: "required: a configuration {format, content}, or a config_version with its source_node_id"}}
	case b.Configuration != nil:
		probs = append(probs, CheckConfigDocument("configuration", b.Configuration.Format, b.Configuration.Content)...)
		if b.SourceNodeID != "" {
			probs = append(probs, httpapi.FieldProblem{Path: "source_node_id", Message: "only with config_version"})
		}
	default:
		if len(b.ConfigVersion) > maxIDLen || !wire.ValidID(b.ConfigVersion) {
			probs = append(probs, httpapi.FieldProblem{Path: "config_version", Message: "a version id such as v3"})
		}
		switch {
		case b.SourceNodeID == "":
			probs = append(probs, httpapi.FieldProblem{Path: "source_node_id", Message: "required with config_version: the node whose Hub version it is"})
		case !wire.ValidID(b.SourceNodeID):
			probs = append(probs, httpapi.FieldProblem{Path: "source_node_id", Message: idMessage})
		}
	}
	return probs
}

// checkRolloutNodes checks node_ids: present, bounded, valid, unique and
// registered. It returns the ids when they are all good.
func (h *Hub) checkRolloutNodes(ids []string) ([]string, []httpapi.FieldProblem) {
	switch {
	case len(ids) == 0:
		return nil, []httpapi.FieldProblem{{Path: "node_ids", Message: "required: at least one node id"}}
	case len(ids) > maxRolloutNodes:
		return nil, []httpapi.FieldProblem{{Path: "node_ids", Message: "at most " + strconv.Itoa(maxRolloutNodes) + " node ids"}}
	}
	var probs []httpapi.FieldProblem
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		path := "node_ids[" + strconv.Itoa(i) + "]"
		switch n, _ := h.fleet.Node(id); {
		case !wire.ValidID(id):
			probs = append(probs, httpapi.FieldProblem{Path: path, Message: idMessage})
		case seen[id]:
			probs = append(probs, httpapi.FieldProblem{Path: path, Message: "duplicate node id " + quote(id)})
		case n.RegisteredAt.IsZero():
			probs = append(probs, httpapi.FieldProblem{Path: path, Message: "no node " + quote(id) + " has registered with the Hub"})
		}
		seen[id] = true
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return ids, nil
}

// checkRolloutPlan checks the waves, the gate, the pause and the failure
// budget, and splits ids (nil when they were bad) into waves.
func checkRolloutPlan(b wire.RolloutCreateRequest, ids []string) (rollout.Plan, []httpapi.FieldProblem) {
	var probs []httpapi.FieldProblem
	waves := true
	switch {
	case b.BatchSize != 0 && len(b.WavePercentages) > 0:
		probs = append(probs, httpapi.FieldProblem{Path: "batch_size", Message: "exactly one of batch_size and wave_percentages"})
		waves = false
	case b.BatchSize == 0 && len(b.WavePercentages) == 0:
		probs = append(probs, httpapi.FieldProblem{Path: "batch_size", Message: "required: batch_size (nodes per wave) or wave_percentages"})
		waves = false
	case b.BatchSize < 0:
		probs = append(probs, httpapi.FieldProblem{Path: "batch_size", Message: "must be at least 1"})
		waves = false
	}
	gate := b.GateTimeoutMS
	if gate == 0 {
		gate = defaultGateTimeoutMS
	}
	if gate < minGateTimeoutMS || gate > maxRolloutMS {
		probs = append(probs, httpapi.FieldProblem{Path: "gate_timeout_ms", Message: "must be " + strconv.Itoa(minGateTimeoutMS) + ".." + strconv.Itoa(maxRolloutMS)})
	}
	for _, f := range []struct {
		path string
		v    int64
	}{{"soak_ms", b.SoakMS}, {"pause_ms", b.PauseMS}} {
		if f.v < 0 || f.v > maxRolloutMS {
			probs = append(probs, httpapi.FieldProblem{Path: f.path, Message: "must be 0.." + strconv.Itoa(maxRolloutMS)})
		}
	}
	if b.MaxFailures < 0 {
		probs = append(probs, httpapi.FieldProblem{Path: "max_failures", Message: "must be at least 0"})
	}
	plan := rollout.Plan{GateTimeout: msDuration(gate), Soak: msDuration(b.SoakMS), Pause: msDuration(b.PauseMS), MaxFailures: b.MaxFailures}
	if waves && ids != nil {
		w, err := rollout.Waves(ids, b.BatchSize, b.WavePercentages)
		if err != nil {
			path := "wave_percentages"
			if b.BatchSize != 0 {
				path = "batch_size"
			}
			probs = append(probs, httpapi.FieldProblem{Path: path, Message: err.Error()})
		}
		plan.Waves = w
	}
	return plan, probs
}

func msDuration(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
