package hub

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// Check names and states of a job validation report.
const (
	checkSpec           = "spec"
	checkNode           = "node"
	checkComponents     = "components"
	checkNetworkShuffle = "network_shuffle"
	checkStateBackend   = "state_backend"
	checkSecrets        = "secrets"

	checkPassed  = "passed"
	checkFailed  = "failed"
	checkPending = "pending"
	checkSkipped = "skipped"
)

// stateBackends are the job state backends nodes of this release run.
var stateBackends = []string{"embedded_kv"}

// postJobValidate deep-validates a spec against target nodes, creating no
// job. The Hub checks what it knows (the spec itself, each node's
// registration, liveness and capabilities, the state backend, the data
// plane when the plan needs it); what needs the node itself (secret
// references it must resolve, its state root and artifact store) runs
// there as a read-only job_validate command whose report is the result of
// the operation named in "operations".
func (h *Hub) postJobValidate(w http.ResponseWriter, r *http.Request) error {
	var body wire.JobValidateRequest
	if err := httpapi.DecodeJSON(r, &body, MaxBodyBytes); err != nil {
		return err
	}
	probs := append(checkNodeIDs(body.NodeIDs), checkPlacement(body.Placement)...)
	if len(body.NodeIDs) == 0 {
		probs = append(probs, httpapi.FieldProblem{Path: "node_ids", Message: "name at least one node to validate against"})
	}
	if len(probs) > 0 {
		return httpapi.Validation(probs)
	}
	resp := wire.JobValidateResponse{Problems: []wire.ValidationProblem{}, Nodes: []wire.JobValidation{}, RequiredCapabilities: []string{}}
	m, sp := h.materializeJob(body.Spec)
	for _, p := range sp {
		resp.Problems = append(resp.Problems, wire.ValidationProblem{Path: p.Path, Message: p.Message})
	}
	if m != nil {
		resp.RequiredCapabilities, resp.SecretReferences, resp.Plan = m.required, m.secrets, m.explain
	}
	ctx := r.Context()
	now, by := h.opts.Now(), actorOf(ctx)
	ids := slices.Compact(slices.Sorted(slices.Values(body.NodeIDs)))
	resp.Valid = m != nil
	for _, id := range ids {
		v := h.validateOn(id, m, body.Placement == wire.PlacementSplit)
		if m != nil && v.Valid {
			payload, err := json.Marshal(wire.CommandPayload{JobCommand: wire.JobCommand{Spec: body.Spec}})
			if err != nil {
				return err
			}
			in, err := h.st.WriteJobCommand(ctx, store.JobCommandWrite{IntentID: h.opts.NewID(), Operation: wire.CommandJobValidate,
				JobID: m.job.ID, NodeID: id, Payload: payload, CorrelationID: httpapi.CorrelationID(ctx), Actor: by.id, ActorKind: by.kind,
				Now: now, ExpiresAt: now.Add(h.opts.Settings.IntentTTL)})
			if err != nil {
				return h.storeFailed(err)
			}
			if resp.Operations == nil {
				resp.Operations = map[string]string{}
			}
			resp.Operations[id] = in.ID
			h.markWritten(id)
			v.Pending = true
		}
		resp.Valid = resp.Valid && v.Valid
		resp.Nodes = append(resp.Nodes, v)
	}
	if resp.Operations != nil {
		h.nudge()
	}
	return httpapi.WriteJSON(w, http.StatusOK, resp)
}

// validateOn is the Hub's part of one node's report; split checks the
// node can take part in a split placement (network_shuffle and a data
// address).
func (h *Hub) validateOn(nodeID string, m *materialized, split bool) wire.JobValidation {
	v := wire.JobValidation{NodeID: nodeID, Valid: true}
	add := func(check, status, path, msg string) {
		v.Checks = append(v.Checks, wire.JobCheck{Check: check, Status: status, Path: path, Message: msg})
		if status == checkFailed {
			v.Valid = false
		}
	}
	if m == nil {
		add(checkSpec, checkFailed, specPath, "the specification has problems; see problems")
	} else {
		add(checkSpec, checkPassed, "", "")
	}
	n, known := h.fleet.Node(nodeID)
	status, mode, caps, dataAddress := n.Status, n.Mode, n.Capabilities, n.DataAddress
	switch {
	case !known:
		add(checkNode, checkFailed, "", "no node with this id has registered with the Hub")
	case status != "online":
		add(checkNode, checkPassed, "", "registered, "+status+": the node checks run when it is back")
	case mode != wire.NodeModeActive:
		add(checkNode, checkPassed, "", "online, "+mode+": new work waits until it is active")
	default:
		add(checkNode, checkPassed, "", "online and active")
	}
	if m == nil {
		return v
	}
	if known {
		var missing []string
		for _, c := range m.required {
			if !slices.Contains(caps, c) {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			add(checkComponents, checkFailed, "", "the node does not advertise "+strings.Join(missing, ", "))
		} else {
			add(checkComponents, checkPassed, "", "every source and sink component is present")
		}
	}
	switch {
	case !split:
		add(checkNetworkShuffle, checkSkipped, "", "placement colocated: the job runs on one node; no edge needs the data plane")
	case !known:
		add(checkNetworkShuffle, checkFailed, "", "an unknown node advertises no data plane")
	case !slices.Contains(caps, wire.CapabilityNetworkShuffle):
		add(checkNetworkShuffle, checkFailed, "", "the node does not advertise network_shuffle (no health_check.data_port)")
	case dataAddress == "":
		add(checkNetworkShuffle, checkFailed, "", "the node advertises no data address its peers can dial")
	default:
		add(checkNetworkShuffle, checkPassed, "", "data plane at "+dataAddress)
	}
	if st := m.job.State; st != nil && st.Backend != "" && !slices.Contains(stateBackends, st.Backend) {
		add(checkStateBackend, checkFailed, "spec.state.backend", "unsupported state backend "+quote(st.Backend)+"; nodes run embedded_kv")
	} else {
		add(checkStateBackend, checkPassed, "", "")
	}
	if len(m.secrets) > 0 {
		add(checkSecrets, checkPending, "", "the node must resolve "+strings.Join(m.secrets, ", "))
	} else {
		add(checkSecrets, checkPassed, "", "no secret references")
	}
	return v
}
