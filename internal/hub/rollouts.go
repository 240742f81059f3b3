package hub

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/rollout"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// Rollout problem codes (API.md).
const CodeRolloutNotFound = "rollout_not_found"

// Audit actions of rollouts. An operator action is audited as
// "rollout_<action>"; every step the Hub takes as rollout_changed; the
// applies a rollout writes as rollout_apply and rollout_rollback.
const (
	ActionRolloutCreate   = "rollout_create"
	ActionRolloutChanged  = "rollout_changed"
	ActionRolloutApply    = "rollout_apply"
	ActionRolloutRollback = "rollout_rollback"
	// actionRolloutAction names a rejected action request whose action
	// is not one of the four.
	actionRolloutAction = "rollout_action"
)

// rolloutActions are the actions of POST /rollouts/{id}/actions.
var rolloutActions = []string{wire.RolloutActionPause, wire.RolloutActionResume, wire.RolloutActionCancel, wire.RolloutActionRollback}

// rolloutStates are the values of GET /rollouts?state=.
var rolloutStates = []string{wire.RolloutPending, wire.RolloutRunning, wire.RolloutPaused, wire.RolloutSucceeded,
	wire.RolloutFailed, wire.RolloutCancelled, wire.RolloutRolledBack}

// saveRetries bounds how often an action re-reads a rollout a reconciler
// pass saved meanwhile.
const saveRetries = 5

// rolloutRoutes are the rollout routes (docs/hub-api.md "Rollouts").
func (h *Hub) rolloutRoutes(p string) []httpapi.Route {
	return []httpapi.Route{
		{Method: "POST", Pattern: p + "/rollouts", Handler: h.auditedAs("rollout", fixedAction(ActionRolloutCreate), h.postRollout),
			Doc: httpapi.Doc{Summary: "Roll a configuration out to nodes, wave by wave", Tag: tagRollouts, Request: wire.RolloutCreateRequest{},
				Status: http.StatusCreated, Response: wire.Rollout{}, Location: true, Problems: []int{http.StatusNotFound}}},
		{Method: "GET", Pattern: p + "/rollouts", Handler: h.getRollouts, Doc: httpapi.Doc{Summary: "The rollouts", Tag: tagRollouts, Paged: true,
			Query: []httpapi.Param{{Name: "state", Enum: rolloutStates}}, Response: wire.Page[wire.Rollout]{}}},
		{Method: "GET", Pattern: p + "/rollouts/{id}", Handler: h.getRollout, Doc: httpapi.Doc{Summary: "One rollout", Tag: tagRollouts,
			Response: wire.Rollout{}, Problems: []int{http.StatusNotFound}}},
		{Method: "POST", Pattern: p + "/rollouts/{id}/actions", Handler: h.auditedAs("rollout", rolloutActionName, h.postRolloutAction),
			Doc: httpapi.Doc{Summary: "Pause, resume, cancel or roll back a rollout", Tag: tagRollouts, Request: wire.RolloutActionRequest{},
				Response: wire.Rollout{}, Problems: []int{http.StatusNotFound}}},
	}
}

// rolloutActionName is the audit action of an action request: the handler
// records the body's action in the path value "action" once it is known.
func rolloutActionName(r *http.Request) string {
	if a := r.PathValue("action"); slices.Contains(rolloutActions, a) {
		return "rollout_" + a
	}
	return actionRolloutAction
}

func (h *Hub) postRollout(w http.ResponseWriter, r *http.Request) error {
	var body wire.RolloutCreateRequest
	if err := httpapi.DecodeJSON(r, &body, MaxBodyBytes); err != nil {
		return err
	}
	ctx := r.Context()
	ro, err := h.planRollout(ctx, body)
	if err != nil {
		return err
	}
	now := h.opts.Now()
	ro.Rollout = rollout.New(h.opts.NewID(), ro.Plan, now)
	ro.Revision = 1
	by := actorOf(ctx)
	ro.Actor, ro.ActorKind, ro.CorrelationID = by.id, by.kind, httpapi.CorrelationID(ctx)
	ro.CreatedAt = now
	if err := h.st.CreateRollout(ctx, ro); err != nil {
		return h.storeFailedAbout(err, aRollout)
	}
	h.nudge()
	w.Header().Set("Location", h.prefix+"/rollouts/"+ro.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, h.rolloutView(ctx, ro))
}

func (h *Hub) getRollouts(w http.ResponseWriter, r *http.Request) error {
	p, err := paging(r)
	if err != nil {
		return err
	}
	state := r.URL.Query().Get("state")
	if state != "" && !slices.Contains(rolloutStates, state) {
		return httpapi.BadRequest(httpapi.CodeInvalidQuery, "state must be one of "+strings.Join(rolloutStates, ", "))
	}
	ctx := r.Context()
	pg, err := h.st.ListRollouts(ctx, store.RolloutFilter{State: state,
		Visible: readable(ctx, func(ro store.Rollout) access.Resource { return access.Resource{Rollout: ro.ID} })}, p)
	if err != nil {
		return problemFor(err, anyResource)
	}
	out := wire.Page[wire.Rollout]{Items: make([]wire.Rollout, 0, len(pg.Items)), Page: pg.Page, PageSize: pg.PageSize, Total: pg.Total}
	for _, ro := range pg.Items {
		out.Items = append(out.Items, h.rolloutView(ctx, ro))
	}
	return httpapi.WriteJSON(w, http.StatusOK, out)
}

func (h *Hub) getRollout(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	ro, err := h.st.GetRollout(ctx, r.PathValue("id"))
	if err != nil {
		return problemFor(err, aRollout)
	}
	v := h.rolloutView(ctx, ro)
	if v.Preflight, err = h.preflight(ctx, ro, h.opts.Now(), false); err != nil {
		return h.storeFailed(err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, v)
}

// postRolloutAction applies pause, resume, cancel or rollback through
// rollout.Act and commits the result with its applies, events and audit
// rows in one transaction, re-reading the rollout when a reconciler pass
// saved it meanwhile.
func (h *Hub) postRolloutAction(w http.ResponseWriter, r *http.Request) error {
	var body wire.RolloutActionRequest
	if err := httpapi.DecodeJSON(r, &body, MaxBodyBytes); err != nil {
		return err
	}
	if !slices.Contains(rolloutActions, body.Action) {
		return httpapi.Validation([]httpapi.FieldProblem{{Path: "action", Message: "must be one of " + strings.Join(rolloutActions, ", ")}})
	}
	r.SetPathValue("action", body.Action)
	ctx := r.Context()
	id := r.PathValue("id")
	by := stepBy{by: actorOf(ctx), correlationID: httpapi.CorrelationID(ctx)}
	for attempt := 1; ; attempt++ {
		cur, err := h.st.GetRollout(ctx, id)
		if err != nil {
			return problemFor(err, aRollout)
		}
		now := h.opts.Now()
		obs, err := h.configObservations(ctx, cur.Nodes, now)
		if err != nil {
			return h.storeFailed(err)
		}
		next, effects, err := rollout.Act(cur.Rollout, body.Action, obs, now)
		if errors.Is(err, rollout.ErrAction) {
			e := httpapi.Conflict(httpapi.CodeConflict, err.Error())
			e.Details = map[string]any{"state": cur.State, "action": body.Action}
			return e
		}
		if err != nil {
			return err
		}
		u := h.rolloutUpdate(cur, next, effects, by, now)
		if !hasRolloutEvent(effects) {
			u.Events = append(u.Events, by.event(cur, now, "rollout "+next.State, map[string]any{"state": next.State}))
		}
		for _, e := range u.Events {
			if e.NodeID == "" {
				e.Data["action"], e.Data["previous"] = body.Action, cur.State
			}
		}
		u.Audit = append(u.Audit, by.audit(cur.ID, actionOf(r), now))
		res, err := h.st.SaveRollout(ctx, u)
		if errors.Is(err, store.ErrRolloutConflict) && attempt < saveRetries {
			continue
		}
		if err != nil {
			return h.storeFailedAbout(err, aRollout)
		}
		h.rolloutSaved(res)
		return httpapi.WriteJSON(w, http.StatusOK, h.rolloutView(ctx, res.Rollout))
	}
}

// hasRolloutEvent reports whether effects hold an event of the rollout as
// a whole (not of one node).
func hasRolloutEvent(effects []rollout.Effect) bool {
	return slices.ContainsFunc(effects, func(e rollout.Effect) bool {
		return e.Kind == rollout.EffectEvent && effectNode(e) == ""
	})
}

// effectNode is the node an effect is about ("" for the rollout as a
// whole): Step names the node of a phase change in its data.
func effectNode(e rollout.Effect) string {
	if e.NodeID != "" {
		return e.NodeID
	}
	id, _ := e.Data["node_id"].(string)
	return id
}
