package hub

import (
	"context"
	"net/http"
	"strings"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// routePermissions is the one table of what each operator route needs,
// keyed by method and pattern without the API prefix. A route missing here
// is refused to everyone (TestRoutePermissions fails first). Reads need
// access.Read; the writes follow the roles of docs/security.md.
var routePermissions = map[string]access.Permission{
	"GET /system":                                 access.Read,
	"GET /status":                                 access.Read,
	"GET /auth/whoami":                            access.Read,
	"GET /openapi.json":                           access.Read,
	"GET /nodes":                                  access.Read,
	"GET /nodes/{node_id}":                        access.Read,
	"GET /streams":                                access.Read,
	"GET /nodes/{node_id}/streams/{id}":           access.Read,
	"GET /operations":                             access.Read,
	"GET /operations/status":                      access.Read,
	"GET /operations/{id}":                        access.Read,
	"GET /events":                                 access.Read,
	"GET /events/stream":                          access.Read,
	"GET /audit":                                  access.Read,
	"GET /components":                             access.Read,
	"GET /components/{kind}/{name}":               access.Read,
	"GET /schema":                                 access.Read,
	"GET /metrics":                                access.Read,
	"GET /jobs":                                   access.Read,
	"GET /jobs/{id}":                              access.Read,
	"GET /jobs/{id}/status":                       access.Read,
	"GET /jobs/{id}/detail":                       access.Read,
	"GET /jobs/{id}/versions":                     access.Read,
	"GET /jobs/{id}/plan":                         access.Read,
	"GET /jobs/{id}/checkpoints":                  access.Read,
	"GET /jobs/{id}/savepoints":                   access.Read,
	"GET /jobs/{id}/upgrades":                     access.Read,
	"GET /nodes/{node_id}/configuration":          access.Read,
	"GET /nodes/{node_id}/configuration/versions": access.Read,
	"GET /rollouts":                               access.Read,
	"GET /rollouts/{id}":                          access.Read,
	"GET /history":                                access.Read,
	"GET /nodes/{node_id}/history":                access.Read,
	"GET /nodes/{node_id}/streams/{id}/history":   access.Read,
	"GET /jobs/{id}/history":                      access.Read,

	"GET /nodes/{node_id}/streams/{id}/tap":              access.Tap,
	"GET /nodes/{node_id}/jobs/{id}/tap":                 access.Tap,
	"PUT /nodes/{node_id}/streams/{id}/desired-state":    access.StreamOperate,
	"DELETE /nodes/{node_id}/streams/{id}/desired-state": access.StreamOperate,
	"POST /nodes/{node_id}/streams/{id}/actions/restart": access.StreamOperate,
	"POST /nodes/{node_id}/streams/{id}/start":           access.StreamOperate,
	"POST /nodes/{node_id}/streams/{id}/stop":            access.StreamOperate,
	"POST /nodes/{node_id}/streams/{id}/restart":         access.StreamOperate,
	"POST /streams/{id}/start":                           access.StreamOperate,
	"POST /streams/{id}/stop":                            access.StreamOperate,
	"POST /streams/{id}/restart":                         access.StreamOperate,
	"PUT /jobs/{id}/desired-state":                       access.JobOperate,
	"POST /jobs/{id}/checkpoints":                        access.JobOperate,
	"POST /jobs/{id}/savepoints":                         access.JobOperate,
	"POST /jobs/{id}/actions/start":                      access.JobOperate,
	"POST /jobs/{id}/actions/stop":                       access.JobOperate,
	"POST /jobs/{id}/actions/restart":                    access.JobOperate,
	"POST /nodes/{node_id}/drain":                        access.NodeOperate,
	"POST /nodes/{node_id}/maintenance":                  access.NodeOperate,
	"DELETE /nodes/{node_id}/maintenance":                access.NodeOperate,
	"DELETE /operations/{id}":                            access.OperationCancel,
	"POST /jobs/validate":                                access.Check,
	"POST /nodes/{node_id}/configuration/validate":       access.Check,
	"GET /nodes/{node_id}/configuration/diff":            access.Check,

	"POST /jobs":               access.JobAdmin,
	"POST /jobs/{id}/upgrades": access.JobAdmin,
	"POST /jobs/{id}/upgrades/{upgrade_id}/rollback":         access.JobAdmin,
	"POST /jobs/{id}/actions/move":                           access.JobAdmin,
	"POST /nodes/{node_id}/configuration/apply":              access.ConfigurationAdmin,
	"POST /nodes/{node_id}/configuration/rollback/{version}": access.ConfigurationAdmin,
	"POST /rollouts":              access.RolloutAdmin,
	"POST /rollouts/{id}/actions": access.RolloutAdmin,
	"DELETE /nodes/{node_id}":     access.NodeAdmin,
}

// permissionOf is the permission of an operator route, and whether the
// table names it.
func (h *Hub) permissionOf(rt httpapi.Route) (access.Permission, bool) {
	p, ok := routePermissions[rt.Method+" "+strings.TrimPrefix(rt.Pattern, h.prefix)]
	return p, ok
}

// authorize wraps an operator route's handler with the access decision.
// A refused request answers 403 forbidden naming what is missing and
// changes nothing; a refused mutation is audited as rejected (failure
// code forbidden) by the route's audited wrapper, which finds the refusal
// in the request.
func (h *Hub) authorize(rt httpapi.Route, next httpapi.HandlerFunc) httpapi.HandlerFunc {
	perm, known := h.permissionOf(rt)
	resourceOf := h.resourceFunc(rt.Method, rt.Pattern)
	// Every route that needs more than read is audited, GET diff included
	// (it sends a command).
	audited := perm != access.Read
	return func(w http.ResponseWriter, r *http.Request) error {
		if !known {
			return forbidden(access.Missing{Permission: "undefined"})
		}
		ok, missing := access.Allow(httpapi.Caller(r.Context()), perm, resourceOf(r))
		if ok {
			return next(w, r)
		}
		e := forbidden(missing)
		if audited {
			d := &denial{err: e}
			_ = next(w, r.WithContext(context.WithValue(r.Context(), denialKey{}, d)))
			if !d.audited {
				h.log.Error("hub: a refused mutation was not audited: its route lacks the audited wrapper", "route", rt.Method+" "+rt.Pattern)
			}
		}
		return e
	}
}

// forbidden is the 403 of a refused request.
func forbidden(m access.Missing) *httpapi.Error {
	e := httpapi.Forbidden("the principal may not do this: it lacks " + string(m.Permission) + scopeNote(m))
	e.Details = map[string]any{"permission": m.Permission}
	if m.Resource != "" {
		e.Details["resource"] = m.Resource
	}
	return e
}

func scopeNote(m access.Missing) string {
	if m.Resource == "" {
		return ""
	}
	return " on " + m.Resource
}

// denial carries a refused mutation to the route's audited wrapper, which
// records it instead of running the handler.
type denial struct {
	err     error
	audited bool
}

type denialKey struct{}

// deniedOf returns the refusal authorize put in r, nil when r was allowed.
func deniedOf(r *http.Request) *denial {
	d, _ := r.Context().Value(denialKey{}).(*denial)
	return d
}

// resourceFunc returns how a route names the resource it touches, read
// from the path: {node_id}, the stream, job or rollout {id}, the intent
// an operation {id} names. Creating a job or a rollout touches "*": a
// scoped principal needs job:* or rollout:*.
func (h *Hub) resourceFunc(method, pattern string) func(*http.Request) access.Resource {
	p := strings.TrimPrefix(pattern, h.prefix)
	switch {
	case strings.HasPrefix(p, "/jobs/{id}"):
		return func(r *http.Request) access.Resource { return access.Resource{Job: r.PathValue("id")} }
	case p == "/jobs" || p == "/jobs/validate":
		if method == http.MethodGet {
			return fleetResource
		}
		return func(*http.Request) access.Resource { return access.Resource{Job: "*"} }
	case strings.HasPrefix(p, "/rollouts/{id}"):
		return func(r *http.Request) access.Resource { return access.Resource{Rollout: r.PathValue("id")} }
	case p == "/rollouts" && method != http.MethodGet:
		return func(*http.Request) access.Resource { return access.Resource{Rollout: "*"} }
	case strings.HasPrefix(p, "/nodes/{node_id}/jobs/{id}"):
		return func(r *http.Request) access.Resource {
			return access.Resource{Node: r.PathValue("node_id"), Job: r.PathValue("id")}
		}
	case strings.HasPrefix(p, "/nodes/{node_id}/streams/{id}"):
		return func(r *http.Request) access.Resource {
			return access.Resource{Node: r.PathValue("node_id"), Stream: r.PathValue("id")}
		}
	case strings.HasPrefix(p, "/nodes/{node_id}"):
		return func(r *http.Request) access.Resource { return access.Resource{Node: r.PathValue("node_id")} }
	case strings.HasPrefix(p, "/streams/{id}"):
		// The legacy routes name no node: only a principal whose scope
		// covers the stream on every node ("stream:*/<id>") reaches them.
		return func(r *http.Request) access.Resource { return access.Resource{Stream: r.PathValue("id")} }
	case p == "/operations/{id}":
		return func(r *http.Request) access.Resource {
			in, err := h.st.GetIntent(r.Context(), r.PathValue("id"))
			if err != nil {
				// Unknown: the handler answers 404 to whoever may read
				// the fleet; a scoped principal learns nothing either way.
				return access.Resource{}
			}
			return recordResource(in.Kind, in.NodeID, in.ResourceID)
		}
	}
	return fleetResource
}

func fleetResource(*http.Request) access.Resource { return access.Resource{} }

// recordResource is the resource of a stored record (intent, audit row)
// of kind on nodeID about resourceID.
func recordResource(kind, nodeID, resourceID string) access.Resource {
	switch kind {
	case store.KindStream, "":
		if resourceID == "" || resourceID == nodeID {
			return access.Resource{Node: nodeID}
		}
		return access.Resource{Node: nodeID, Stream: resourceID}
	case store.KindJob, store.KindJobCommand:
		return access.Resource{Job: resourceID}
	case "rollout":
		return access.Resource{Rollout: resourceID}
	}
	return access.Resource{Node: nodeID}
}

// mayRead reports whether the request's principal may read res: the
// filter of lists.
func mayRead(ctx context.Context, res access.Resource) bool {
	ok, _ := access.Allow(httpapi.Caller(ctx), access.Read, res)
	return ok
}

// scoped reports whether the request's principal is narrowed by scopes,
// so that lists must be filtered.
func scoped(ctx context.Context) bool { return len(httpapi.Caller(ctx).Scopes) > 0 }

// mayReadEvent reports whether p may read ev: an event names a node and a
// resource whose kind it does not carry, so any reading that p may read
// will do; an event of the fleet itself (no node, no resource) is read
// like the fleet.
func mayReadEvent(p access.Principal, ev wire.Event) bool {
	if ev.NodeID == "" && ev.ResourceID == "" {
		ok, _ := access.Allow(p, access.Read, access.Resource{})
		return ok
	}
	for _, res := range []access.Resource{
		{Node: ev.NodeID, Stream: ev.ResourceID}, {Node: ev.NodeID}, {Job: ev.ResourceID}, {Rollout: ev.ResourceID},
	} {
		if res == (access.Resource{}) || (res.Stream != "" && res.Node == "") {
			continue
		}
		if ok, _ := access.Allow(p, access.Read, res); ok {
			return true
		}
	}
	return false
}

// readable is the list filter of the request's principal: nil when it
// reads every record (the store's COUNT and LIMIT path), otherwise whether
// it may read the resource of a record. The store applies it before
// paging, so a scoped principal's pages are full and its total exact.
func readable[T any](ctx context.Context, resourceOf func(T) access.Resource) func(T) bool {
	if !scoped(ctx) {
		return nil
	}
	p := httpapi.Caller(ctx)
	return func(it T) bool {
		ok, _ := access.Allow(p, access.Read, resourceOf(it))
		return ok
	}
}

// eventsVisible is the event filter of the request's principal; nil when
// it reads every event.
func eventsVisible(ctx context.Context) func(wire.Event) bool {
	if !scoped(ctx) {
		return nil
	}
	p := httpapi.Caller(ctx)
	return func(ev wire.Event) bool { return mayReadEvent(p, ev) }
}
