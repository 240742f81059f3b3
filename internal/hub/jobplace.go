package hub

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/placement"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
)

// place chooses a job's node. Named nodes that cannot take it now (offline,
// draining, unknown) still get it, the first named, as a stream write for
// an offline node does: the intent waits for the node. Without names, no
// capable node online is a 409 with the reason per node.
func (h *Hub) place(ctx context.Context, req placement.Request) (placement.Decision, error) {
	cands, err := h.candidates(ctx)
	if err != nil {
		return placement.Decision{}, problemFor(err, anyResource)
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
			Capabilities: n.Capabilities, Jobs: load[n.NodeID], DataAddress: n.DataAddress, DataFingerprint: n.DataFingerprint})
	}
	slices.SortFunc(out, func(a, b placement.Candidate) int { return cmpString(a.NodeID, b.NodeID) })
	return out, nil
}
