package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/hub/rollout"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// CodePreflightFailed is the failure code of a rollout whose preflight
// found a node that refused its configuration (or did not answer within
// the gate timeout): no node was changed.
const CodePreflightFailed = "preflight_failed"

// ActionRolloutPreflight is the audit action of the configuration_validate
// commands a rollout's preflight sends.
const ActionRolloutPreflight = "rollout_preflight"

// maxPreflightProblems bounds the problems of one node a preflight keeps
// in its view and message.
const maxPreflightProblems = 20

// preflightCorrelation is the correlation id of a rollout's preflight
// validations: the operations of one rollout's preflight are found by it.
func preflightCorrelation(rolloutID string) string { return "preflight-" + rolloutID }

// beforeFirstWave reports whether ro is before its first wave, where the
// preflight gates it: pending (or running or paused without a wave, after
// an action).
func beforeFirstWave(ro store.Rollout) bool {
	switch ro.State {
	case wire.RolloutPending, wire.RolloutRunning, wire.RolloutPaused:
		return ro.CurrentWave == 0
	}
	return false
}

// preflight reads the state of ro's preflight: one configuration_validate
// per target node, newest first. With send, a node without one gets it
// now (the first pass, or one a Hub killed between writes missed).
func (h *Hub) preflight(ctx context.Context, ro store.Rollout, now time.Time, send bool) ([]wire.RolloutPreflight, error) {
	latest := map[string]store.Intent{}
	for page := 1; page <= store.MaxPage; page++ {
		pg, err := h.st.ListIntents(ctx, store.IntentFilter{CorrelationID: preflightCorrelation(ro.ID), Operation: wire.CommandConfigValidate},
			store.Paging{Page: page, PageSize: store.MaxPageSize})
		if err != nil {
			return nil, err
		}
		for _, in := range pg.Items {
			if _, ok := latest[in.NodeID]; !ok {
				latest[in.NodeID] = in // newest first
			}
		}
		if page*store.MaxPageSize >= pg.Total {
			break
		}
	}
	out := make([]wire.RolloutPreflight, 0, len(ro.Nodes))
	for _, n := range ro.Nodes {
		in, ok := latest[n.NodeID]
		if !ok && send {
			var err error
			if in, err = h.sendPreflight(ctx, ro, n.NodeID, now); err != nil {
				return nil, err
			}
			ok = true
		}
		if !ok {
			out = append(out, wire.RolloutPreflight{NodeID: n.NodeID, State: wire.PreflightPending})
			continue
		}
		out = append(out, preflightOf(in))
	}
	return out, nil
}

// sendPreflight writes the configuration_validate of one node of ro, in
// the name of the rollout's creator.
func (h *Hub) sendPreflight(ctx context.Context, ro store.Rollout, nodeID string, now time.Time) (store.Intent, error) {
	payload, err := json.Marshal(wire.CommandPayload{ConfigCommand: wire.ConfigCommand{Format: ro.Format, Content: ro.Content}})
	if err != nil {
		return store.Intent{}, err
	}
	in, err := h.st.WriteConfigCommand(ctx, store.ConfigCommandWrite{IntentID: h.opts.NewID(), Operation: wire.CommandConfigValidate,
		NodeID: nodeID, Payload: payload, Action: ActionRolloutPreflight, CorrelationID: preflightCorrelation(ro.ID),
		Actor: ro.Actor, ActorKind: hubActor.kind, Now: now, ExpiresAt: now.Add(ro.Plan.GateTimeout)})
	if err != nil {
		return store.Intent{}, err
	}
	h.fleet.Mark(nodeID)
	return in, nil
}

// preflightOf is one node's preflight from its configuration_validate:
// the node's report (valid, or its problems) once it succeeded.
func preflightOf(in store.Intent) wire.RolloutPreflight {
	p := wire.RolloutPreflight{NodeID: in.NodeID, OperationID: in.ID, State: wire.PreflightPending}
	switch in.State {
	case wire.OpSucceeded:
		var rep struct {
			Valid  bool                 `json:"valid"`
			Errors []wire.ConfigProblem `json:"errors"`
		}
		if err := json.Unmarshal(in.Result, &rep); err != nil {
			p.State, p.Failure = wire.PreflightFailed, &wire.Failure{Class: "permanent", Code: "invalid_result", Message: "the node's validation report does not decode"}
			return p
		}
		p.State = wire.PreflightValid
		if !rep.Valid {
			p.State = wire.PreflightInvalid
			p.Problems = rep.Errors[:min(len(rep.Errors), maxPreflightProblems)]
		}
	case wire.OpFailed, wire.OpCancelled, wire.OpSuperseded:
		p.State, p.Failure = wire.PreflightFailed, in.Failure
		if p.Failure == nil {
			p.Failure = &wire.Failure{Code: in.State, Message: "the validation was " + in.State}
		}
	}
	return p
}

// preflightVerdict decides a rollout's preflight: passed when every node
// said valid; failed (with a message naming each refusing node and its
// first problems) when one said invalid or failed, or when one has not
// answered by the gate timeout after the rollout's creation; otherwise
// still under way.
func preflightVerdict(pf []wire.RolloutPreflight, created time.Time, gate time.Duration, now time.Time) (passed, failed bool, msg string) {
	var bad []string
	pending := 0
	for _, p := range pf {
		switch p.State {
		case wire.PreflightValid:
		case wire.PreflightPending:
			pending++
		case wire.PreflightInvalid:
			var ps []string
			for _, pr := range p.Problems[:min(len(p.Problems), 3)] {
				if pr.Path == "" {
					ps = append(ps, pr.Message)
				} else {
					ps = append(ps, pr.Path+": "+pr.Message)
				}
			}
			bad = append(bad, p.NodeID+": "+strings.Join(ps, "; "))
		default:
			why := "validation failed"
			if p.Failure != nil && p.Failure.Message != "" {
				why = p.Failure.Message
			}
			bad = append(bad, p.NodeID+": "+why)
		}
	}
	switch {
	case len(bad) > 0:
		return false, true, "preflight: " + strings.Join(bad, " | ")
	case pending == 0:
		return true, false, ""
	case now.Sub(created) >= gate:
		return false, true, fmt.Sprintf("preflight: %d node(s) did not validate the configuration within the gate timeout", pending)
	}
	return false, false, ""
}

// preflightGate runs the preflight of a rollout before its first wave:
// it reports whether Step may go on. A failed preflight fails the rollout
// (code preflight_failed) before any node changed, with a rollout_changed
// event (step preflight) that holds each node's problems.
func (h *Hub) preflightGate(ctx context.Context, ro store.Rollout, now time.Time) bool {
	pf, err := h.preflight(ctx, ro, now, ro.State != wire.RolloutPaused)
	if err != nil {
		h.storeFailed(err)
		h.log.Warn("hub: rollout preflight", "rollout_id", ro.ID, "err", err)
		return false
	}
	passed, failed, msg := preflightVerdict(pf, ro.CreatedAt, ro.Plan.GateTimeout, now)
	if passed || !failed || ro.State == wire.RolloutPaused {
		return passed
	}
	next := ro.Rollout
	next.State, next.FailureCode, next.FailureMsg = wire.RolloutFailed, CodePreflightFailed, msg
	next.UpdatedAt, next.FinishedAt = now, now
	nodes := map[string]any{}
	for _, p := range pf {
		nodes[p.NodeID] = p.State
	}
	effects := []rollout.Effect{{Kind: rollout.EffectEvent, Message: "rollout failed in preflight: no node was changed",
		Data: map[string]any{"step": "preflight", "state": wire.RolloutFailed, "nodes": nodes, "failure_code": CodePreflightFailed}}}
	u := h.rolloutUpdate(ro, next, effects, stepBy{by: actor{id: ro.Actor, kind: hubActor.kind}, correlationID: ro.CorrelationID, hub: true}, now)
	res, err := h.st.SaveRollout(ctx, u)
	if err != nil {
		h.storeFailed(err)
		return false
	}
	h.rolloutSaved(res)
	return false
}
