package hub

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/flowplane/flowplane/internal/hub/rollout"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// driveRollouts advances every active rollout one step (reconciler pass).
// Each step's new state commits with its apply intents, events and audit
// rows in one transaction (SaveRollout), so a Hub killed at any point goes
// on from the last committed step. A rollout another writer (an operator's
// action) saved since it was read is left to the next pass.
func (h *Hub) driveRollouts(ctx context.Context, now time.Time) {
	active, err := h.st.ActiveRollouts(ctx)
	if err != nil {
		h.storeFailed(err)
		return
	}
	for _, ro := range active {
		if ctx.Err() != nil {
			return
		}
		h.stepRollout(ctx, ro, now)
	}
}

// stepRollout takes one step of ro at now.
func (h *Hub) stepRollout(ctx context.Context, ro store.Rollout, now time.Time) {
	// Before its first wave, every target node validates the rollout's
	// configuration: if one refuses it, no node changes.
	if beforeFirstWave(ro) && !h.preflightGate(ctx, ro, now) {
		return
	}
	obs, err := h.configObservations(ctx, ro.Nodes, now)
	if err != nil {
		h.storeFailed(err)
		h.log.Warn("hub: rollout observations", "rollout_id", ro.ID, "err", err)
		return
	}
	next, effects := rollout.Step(ro.Rollout, obs, now)
	if len(effects) == 0 && !rolloutChanged(ro.Rollout, next) {
		return
	}
	u := h.rolloutUpdate(ro, next, effects, stepBy{by: actor{id: ro.Actor, kind: hubActor.kind}, correlationID: ro.CorrelationID, hub: true}, now)
	res, err := h.st.SaveRollout(ctx, u)
	switch {
	case errors.Is(err, store.ErrRolloutConflict):
		return // an action saved it meanwhile: the next pass reads it again
	case err != nil:
		h.storeFailed(err)
		h.log.Warn("hub: rollout step", "rollout_id", ro.ID, "err", err)
		return
	}
	h.rolloutSaved(res)
}

// stepBy is who a rollout step is written in the name of: the operator of
// an action, or, for the reconciler's steps, the rollout's creator with
// kind hub and hub set: the Hub acts for the creator, and its events say
// so (data driven_by: hub) as its audit rows do (message).
type stepBy struct {
	by            actor
	correlationID string
	hub           bool
}

// drivenByHub is the audit message of a step the Hub took for the
// rollout's creator.
const drivenByHub = "driven by the hub for the rollout's creator"

// message is an audit row's message msg, saying so when the Hub drove the
// step.
func (b stepBy) message(msg string) string {
	switch {
	case !b.hub:
		return msg
	case msg == "":
		return drivenByHub
	}
	return msg + "; " + drivenByHub
}

// event is a rollout_changed event of ro.
func (b stepBy) event(ro store.Rollout, now time.Time, msg string, data map[string]any) wire.Event {
	if b.hub {
		data = maps.Clone(data)
		if data == nil {
			data = map[string]any{}
		}
		data["driven_by"] = actorHub
	}
	return wire.Event{Kind: wire.EventRolloutChanged, OccurredAt: wire.At(now), ResourceID: ro.ID,
		CorrelationID: b.correlationID, Actor: b.by.id, ActorKind: b.by.kind, Outcome: store.OutcomeAccepted, Message: msg, Data: data}
}

// audit is an accepted audit row of the rollout.
func (b stepBy) audit(id, action string, now time.Time) store.AuditRecord {
	rec := store.AuditRecord{OccurredAt: wire.At(now), Actor: b.by.id, ActorKind: b.by.kind, Action: action, ResourceType: "rollout",
		ResourceID: id, CorrelationID: b.correlationID, Outcome: store.OutcomeAccepted}
	rec.Message = b.message("")
	return rec
}

// rolloutUpdate turns a step (next and its effects) of cur into the store
// update that commits it: a configuration write per apply (the rollout's
// document as a new version of the node, or for a rollback the version the
// node ran before), a rollout_changed event and audit row per event.
func (h *Hub) rolloutUpdate(cur store.Rollout, next rollout.Rollout, effects []rollout.Effect, by stepBy, now time.Time) store.RolloutUpdate {
	stored := cur
	stored.Rollout = next
	u := store.RolloutUpdate{Rollout: stored}
	for _, e := range effects {
		switch e.Kind {
		case rollout.EffectApply:
			w := store.ConfigWrite{IntentID: h.opts.NewID(), NodeID: e.NodeID, CorrelationID: by.correlationID, Actor: by.by.id, ActorKind: by.by.kind,
				Now: now, ExpiresAt: now.Add(h.opts.Settings.IntentTTL)}
			if e.Rollback {
				if e.Version == "" && e.NodeVersion == "" {
					continue // Act fails such a node (rollback_unavailable) and emits none
				}
				// The Hub version the node ran before, or else its own.
				w.Version, w.Action = e.Version, ActionRolloutRollback
				if e.Version == "" {
					w.NodeVersion = e.NodeVersion
				}
			} else {
				w.Format, w.Content, w.Source, w.RolloutID, w.Action = cur.Format, cur.Content, wire.ConfigSourceRollout, cur.ID, ActionRolloutApply
			}
			u.Applies = append(u.Applies, w)
		case rollout.EffectEvent:
			data := maps.Clone(e.Data)
			if data == nil {
				data = map[string]any{}
			}
			if _, ok := data["state"]; !ok {
				data["state"] = next.State
			}
			ev := by.event(cur, now, e.Message, data)
			ev.NodeID = effectNode(e)
			u.Events = append(u.Events, ev)
			rec := by.audit(cur.ID, ActionRolloutChanged, now)
			rec.NodeID, rec.Message = ev.NodeID, by.message(e.Message)
			u.Audit = append(u.Audit, rec)
		}
	}
	return u
}

// rolloutSaved follows a committed step: the nodes given an intent are
// marked for dispatch (the pass dispatches right after the driver; an
// action nudges it) and their convergence is looked at again. The step's
// events went live through the store's event sink.
func (h *Hub) rolloutSaved(res store.RolloutUpdateResult) {
	if len(res.Intents) == 0 {
		return
	}
	for _, in := range res.Intents {
		h.fleet.Mark(in.NodeID)
	}
	for _, in := range res.Intents {
		h.metrics.accepted.Inc()
		h.converge(in.NodeID)
	}
	h.nudge()
}

// rolloutChanged reports whether Step changed anything of a rollout but
// the times it stamps on what it touches.
func rolloutChanged(a, b rollout.Rollout) bool {
	if a.State != b.State || a.CurrentWave != b.CurrentWave || !a.WavePassed.Equal(b.WavePassed) || a.Failures != b.Failures ||
		a.FailureCode != b.FailureCode || a.FailureMsg != b.FailureMsg || !a.FinishedAt.Equal(b.FinishedAt) || len(a.Nodes) != len(b.Nodes) {
		return true
	}
	return !slices.EqualFunc(a.Nodes, b.Nodes, func(x, y rollout.Node) bool {
		return x.NodeID == y.NodeID && x.Wave == y.Wave && x.Phase == y.Phase && x.VersionBefore == y.VersionBefore &&
			x.NodeVersionBefore == y.NodeVersionBefore && x.Generation == y.Generation && x.AppliedAt.Equal(y.AppliedAt) &&
			x.HealthySince.Equal(y.HealthySince) && x.FailureCode == y.FailureCode && x.FailureMsg == y.FailureMsg &&
			x.VersionTarget == y.VersionTarget && x.OperationID == y.OperationID
	})
}
