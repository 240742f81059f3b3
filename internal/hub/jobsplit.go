package hub

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/placement"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// splitPlacement is a split job's placement as the Hub chose it.
type splitPlacement struct {
	split       store.JobSplit
	coordinator string
	strategy    string
}

// placeSplit places the tasks of m over the eligible nodes among
// requested (every known node when empty, but exclude): online, active,
// advertising job_control, the job's input:/output: capabilities and
// network_shuffle, with a data address. Named nodes must all be eligible;
// without names at least two must be, since a split over one node the Hub
// picked is a colocated job paying for a data plane (naming one node asks
// for exactly that). Otherwise a 409: incompatible_capability when a node
// lacks a capability or a data address, else node_unavailable, with the
// reason per node.
func (h *Hub) placeSplit(ctx context.Context, m *materialized, requested, exclude []string) (splitPlacement, error) {
	cands, err := h.candidates(ctx)
	if err != nil {
		return splitPlacement{}, problemFor(err, anyResource)
	}
	required := slices.Clone(m.required)
	if !slices.Contains(required, wire.CapabilityNetworkShuffle) {
		required = append(required, wire.CapabilityNetworkShuffle)
	}
	eligible, reasons := placement.Eligible(cands, placement.Request{Required: required, Requested: requested, Exclude: exclude})
	strategy := placement.StrategyRequested
	if len(requested) == 0 {
		strategy = placement.StrategyLeastLoaded
	}
	switch {
	case len(requested) > 0 && len(reasons) > 0:
		return splitPlacement{}, splitRefused(reasons, required, "a node named for the split placement cannot take part in it")
	case len(requested) == 0 && len(eligible) < 2:
		return splitPlacement{}, splitRefused(reasons, required,
			"a split placement needs at least two eligible nodes (online, active, advertising network_shuffle and a data address); name one node in node_ids to split over it alone")
	}
	ids := make([]string, len(eligible))
	byID := map[string]placement.Candidate{}
	for i, c := range eligible {
		ids[i], byID[c.NodeID] = c.NodeID, c
	}
	sp := splitPlacement{strategy: strategy, split: store.JobSplit{TaskNodes: placement.Split(m.plan, ids),
		NodeDataPorts: map[string]string{}, NodeDataFingerprints: map[string]string{}}}
	for _, n := range sp.split.TaskNodes {
		sp.split.NodeDataPorts[n] = byID[n].DataAddress
		if fp := byID[n].DataFingerprint; fp != "" {
			sp.split.NodeDataFingerprints[n] = fp
		}
	}
	sp.coordinator = m.plan.Coordinator(sp.split.TaskNodes)
	if sp.split.DataSecret, err = newDataSecret(); err != nil {
		return splitPlacement{}, err
	}
	return sp, nil
}

// splitRefused is the 409 of a split placement the nodes cannot take.
func splitRefused(reasons map[string]string, required []string, msg string) error {
	code := reconcile.CodeNodeUnavailable
	for _, r := range reasons {
		if strings.HasPrefix(r, placement.ReasonMissingCapability) || r == placement.ReasonNoDataAddress {
			code = reconcile.CodeIncompatibleCapability
		}
	}
	e := httpapi.Conflict(code, msg)
	e.Details = map[string]any{"nodes": reasons, "required_capabilities": required}
	return e
}

// newDataSecret is a fresh data-plane secret: 32 random bytes, base64url
// without padding.
func newDataSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// checkPlacement checks a body's placement field ("" is colocated).
func checkPlacement(p string) []httpapi.FieldProblem {
	if p == "" || p == wire.PlacementColocated || p == wire.PlacementSplit {
		return nil
	}
	return []httpapi.FieldProblem{{Path: "placement", Message: "must be colocated or split"}}
}

// moveSplit re-places a split job: over move's node_ids (or its node_id),
// or, with neither, over every eligible node but the job's coordinator.
// The job gets a new data secret; the nodes it leaves get the fence
// job_stop of a move.
func (h *Hub) moveSplit(w http.ResponseWriter, r *http.Request, js store.JobState, m *materialized, move wire.JobMoveRequest) error {
	requested, exclude := move.NodeIDs, []string(nil)
	switch {
	case move.NodeID != "":
		requested = []string{move.NodeID}
	case len(requested) == 0:
		exclude = []string{js.Job.NodeID}
	}
	sp, err := h.placeSplit(r.Context(), m, requested, exclude)
	if err != nil {
		return err
	}
	jw := jobWrite{JobWrite: store.JobWrite{JobID: js.Job.ID, NodeID: sp.coordinator, Split: &sp.split}}
	return h.writeJob(w, r, movedWrite(jw, js))
}
