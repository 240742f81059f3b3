package hub

import (
	"context"

	"github.com/flowplane/flowplane/internal/hub/rollout"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// Failure classes of a rollout's and a rollout node's failure.
const failureClassRollout = "rollout"

// rolloutView is the API view of a stored rollout: its plan, its state and
// each node's progress, with the convergence of the node's configuration
// as the convergence worker last saw it. A document given inline is shown
// with its literal credentials masked (secret references as written).
func (h *Hub) rolloutView(ctx context.Context, ro store.Rollout) wire.Rollout {
	conv := h.rolloutConvergence(ctx, ro.Nodes)
	v := wire.Rollout{RolloutID: ro.ID, State: ro.State, ConfigVersion: ro.ConfigVersion, SourceNodeID: ro.SourceNodeID,
		SHA256: ro.SHA256, NodeIDs: []string{}, Waves: [][]string{}, CurrentWave: ro.CurrentWave,
		GateTimeoutMS: ro.Plan.GateTimeout.Milliseconds(), SoakMS: ro.Plan.Soak.Milliseconds(), PauseMS: ro.Plan.Pause.Milliseconds(),
		MaxFailures: ro.Plan.MaxFailures, Failures: ro.Failures, Nodes: make([]wire.RolloutNode, 0, len(ro.Nodes)),
		Actor: ro.Actor, ActorKind: ro.ActorKind, CorrelationID: ro.CorrelationID, CreatedAt: wire.At(ro.CreatedAt), UpdatedAt: wire.At(ro.UpdatedAt),
		FinishedAt: wire.At(ro.FinishedAt)}
	if ro.ConfigVersion == "" && ro.Content != "" {
		v.Configuration = &wire.ConfigDocument{Format: ro.Format, Content: maskedContent(ro.Format, ro.Content)}
	}
	for _, wave := range ro.Plan.Waves {
		v.Waves = append(v.Waves, append([]string{}, wave...))
		v.NodeIDs = append(v.NodeIDs, wave...)
	}
	if ro.FailureCode != "" {
		v.Failure = &wire.Failure{Class: failureClassRollout, Code: ro.FailureCode, Message: ro.FailureMsg}
	}
	for _, n := range ro.Nodes {
		rn := wire.RolloutNode{NodeID: n.NodeID, Wave: n.Wave, Phase: n.Phase, VersionBefore: n.VersionBefore,
			NodeVersionBefore: n.NodeVersionBefore, VersionTarget: n.VersionTarget, OperationID: n.OperationID,
			Convergence: conv[n.NodeID], UpdatedAt: wire.At(n.UpdatedAt)}
		if rn.VersionBefore == "" && n.NodeVersionBefore != "" {
			// The node ran no Hub apply then: its own id, labelled so.
			rn.VersionBefore = wire.NodeVersionLabel + n.NodeVersionBefore
		}
		if n.FailureCode != "" {
			rn.Failure = &wire.Failure{Class: failureClassRollout, Code: n.FailureCode, Message: n.FailureMsg}
		}
		v.Nodes = append(v.Nodes, rn)
	}
	return v
}

// rolloutConvergence is the convergence of each node's configuration, by
// the one convergence rule, for the nodes the Hub desires a configuration
// of (the others are absent: not known). A failed read leaves them all
// absent: the view is still served.
func (h *Hub) rolloutConvergence(ctx context.Context, nodes []rollout.Node) map[string]string {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.NodeID
	}
	ncs, err := h.st.NodeConfigs(ctx, ids)
	if err != nil {
		return nil
	}
	now := h.opts.Now()
	out := make(map[string]string, len(ncs))
	for id, nc := range ncs {
		if nc.Desired == nil {
			continue
		}
		nc.NodeID = id
		out[id] = h.convergenceOf(configState(nc), now).Value
	}
	return out
}
