package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/eventlog"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/node/history"
	"github.com/flowplane/flowplane/internal/openapi"
	"github.com/flowplane/flowplane/internal/wire"
)

// MaxBodyBytes caps a Node API request body.
const MaxBodyBytes = 1 << 20

// server serves the Node API of one node.
type server struct {
	n       *Node
	events  *eventlog.Log
	schema  map[string]any
	metrics http.Handler
	log     *slog.Logger
	agent   func() AgentStatus // nil without an Agent
}

// HandlerOptions configure the node's HTTP surfaces.
type HandlerOptions struct {
	HealthCheck config.HealthCheck
	Events      *eventlog.Log
	Metrics     *prometheus.Registry
	Logger      *slog.Logger
	// AgentStatus, when set, reports the Agent's connection to its Hub
	// on GET /system.
	AgentStatus func() AgentStatus
	// Server bounds the listener's connections and timeouts; zero values
	// take httpapi's defaults.
	Server httpapi.ServerOptions
}

func newServer(n *Node, o HandlerOptions) *server {
	return &server{
		n: n, events: o.Events, log: o.Logger, agent: o.AgentStatus,
		schema:  config.Schema(n.opts.Registry),
		metrics: promhttp.HandlerFor(o.Metrics, promhttp.HandlerOpts{ErrorLog: nil}),
	}
}

// Handler returns the control-plane router: every Node API route, the
// probes and the observability endpoints, behind the token when one is set.
func (n *Node) Handler(o HandlerOptions) *httpapi.Router {
	s := newServer(n, o)
	hc := o.HealthCheck
	var auth httpapi.Authenticator
	if hc.APIToken != "" {
		auth = httpapi.BearerToken(hc.APIToken, "operator")
	}
	routes := s.routes(hc)
	// The document describes the table it is served from, itself included.
	routes = append(routes, httpapi.Route{Method: "GET", Pattern: OpenAPIPath,
		Handler: openapi.Handler(func() ([]byte, error) { return openapi.Build(openAPIInfo, routes) }), Doc: openapi.Doc(tagNode)})
	return httpapi.NewRouter(routes, httpapi.Options{
		Logger: o.Logger, Auth: auth, AllowedOrigins: hc.CORSOrigins, MaxBodyBytes: MaxBodyBytes,
	})
}

// OpenAPI returns the OpenAPI document of the router Handler(o) builds.
func (n *Node) OpenAPI(o HandlerOptions) ([]byte, error) {
	return openapi.Build(openAPIInfo, n.Handler(o).Routes())
}

// OpenAPIPath serves the Node API's OpenAPI document, behind the token
// like every other route (routes are not enumerable without it).
const OpenAPIPath = "/openapi.json"

// openAPIInfo describes the Node API for its OpenAPI document.
var openAPIInfo = openapi.Info{
	Title:   "flowplane Node API",
	Version: "1",
	Description: "The control-plane API of one flowplane node (docs/node-api.md). " +
		"Errors are the problem envelope of docs/api-conventions.md; every response carries X-Correlation-ID.",
	Security: map[string]openapi.SecurityScheme{
		"apiToken": {Description: "health_check.api_token, when the node sets one; without it the API serves loopback Host values only."},
	},
	DefaultSecurity: "apiToken",
	Types:           openapi.WireTypes,
}

// ObservabilityHandler serves only the observability endpoints, for the
// listener that runs when the control-plane server is disabled.
func (n *Node) ObservabilityHandler(o HandlerOptions) *httpapi.Router {
	s := newServer(n, o)
	ob := o.HealthCheck.Observability
	return httpapi.NewRouter([]httpapi.Route{
		{Method: "GET", Pattern: ob.MetricsPath, Handler: s.getMetrics, Public: true},
		{Method: "GET", Pattern: ob.ReadyPath, Handler: s.getReadiness, Public: true},
		{Method: "GET", Pattern: ob.LivePath, Handler: s.getLiveness, Public: true},
	}, httpapi.Options{Logger: o.Logger, MaxBodyBytes: MaxBodyBytes})
}

func (s *server) routes(hc config.HealthCheck) []httpapi.Route {
	ob := hc.Observability
	// Route documentation (internal/openapi): the body types the handlers
	// encode, the statuses they answer beyond the common ones.
	var (
		opFilters = []httpapi.Param{{Name: "node_id"}, {Name: "resource_id"}, {Name: "operation"}, {Name: "state"}, {Name: "correlation_id"}}
		action    = func(verb string) httpapi.Doc {
			return httpapi.Doc{Summary: verb + " a stream", Tag: tagStreams, Request: struct{}{}, RequestOptional: true,
				Status: http.StatusAccepted, Response: wire.DesiredStateResponse{}, ETag: true, Location: true, IfMatch: true,
				Problems: []int{http.StatusNotFound}}
		}
		docConfig = httpapi.Doc{Summary: "The applied configuration", Tag: tagConfig, Response: versionView{},
			Problems: []int{http.StatusNotFound, http.StatusServiceUnavailable}}
		docValidate = httpapi.Doc{Summary: "Validate a configuration without applying it", Tag: tagConfig,
			Request: configBody, RequestMedia: configMedia, Response: Report{}}
		docVersions = httpapi.Doc{Summary: "The stored configuration versions", Tag: tagConfig, Paged: true,
			Response: wire.Page[versionView]{}, Problems: []int{http.StatusServiceUnavailable}}
		docApply = httpapi.Doc{Summary: "Apply a configuration, the draft ({\"draft\": true}) or a stored version ({\"version\": \"v3\"})",
			Tag: tagConfig, Request: httpapi.AnyOf{configDocument{}, applyRef{}, map[string]any{}}, RequestMedia: configMedia, Status: http.StatusAccepted, Response: wire.Operation{},
			Location: true, Problems: []int{http.StatusNotFound, http.StatusServiceUnavailable}}
		docRollback = httpapi.Doc{Summary: "Apply a stored configuration version again", Tag: tagConfig, Status: http.StatusAccepted,
			Response: wire.Operation{}, Location: true, Problems: []int{http.StatusNotFound, http.StatusServiceUnavailable}}
		docMetrics = httpapi.Doc{Summary: "Prometheus metrics", Tag: tagProbes, ResponseMedia: "text/plain"}
		docProbe   = func(what string, down bool) httpapi.Doc {
			d := httpapi.Doc{Summary: what + " probe", Tag: tagProbes, Response: Probe{}}
			if down {
				d.Also = []int{http.StatusServiceUnavailable}
			}
			return d
		}
	)
	routes := []httpapi.Route{
		{Method: "GET", Pattern: "/system", Handler: s.getSystem, Doc: httpapi.Doc{Summary: "The node's static descriptor", Tag: tagNode, Response: System{}}},
		{Method: "GET", Pattern: "/status", Handler: s.getStatus, Doc: httpapi.Doc{Summary: "The node's runtime status", Tag: tagNode, Response: Status{}}},
		{Method: "GET", Pattern: "/nodes", Handler: s.getNodes, Doc: httpapi.Doc{Summary: "This node, as a collection", Tag: tagNode, Paged: true, Response: wire.Page[View]{}}},
		{Method: "GET", Pattern: "/node", Handler: s.getNode, Doc: httpapi.Doc{Summary: "This node", Tag: tagNode, Response: View{}}},
		{Method: "GET", Pattern: "/streams", Handler: s.getStreams, Doc: httpapi.Doc{Summary: "The streams", Tag: tagStreams, Paged: true, Response: wire.Page[wire.Stream]{}}},
		{Method: "GET", Pattern: "/streams/{id}", Handler: s.getStream, Doc: httpapi.Doc{Summary: "One stream: desired, observed, convergence", Tag: tagStreams,
			Response: wire.Stream{}, ETag: true, Problems: []int{http.StatusNotFound}}},
		{Method: "POST", Pattern: "/streams/{id}/start", Handler: s.postAction(OpStart), Doc: action("Start")},
		{Method: "POST", Pattern: "/streams/{id}/stop", Handler: s.postAction(OpStop), Doc: action("Stop")},
		{Method: "POST", Pattern: "/streams/{id}/restart", Handler: s.postAction(OpRestart), Doc: action("Restart")},
		{Method: "GET", Pattern: "/streams/{id}/tap", Handler: s.getStreamTap, Doc: tapDoc(TapStream, "stage")},
	}
	routes = append(routes, s.jobRoutes()...)
	routes = append(routes, []httpapi.Route{
		{Method: "GET", Pattern: "/operations", Handler: s.getOperations, Doc: httpapi.Doc{Summary: "The operations, newest first", Tag: tagOperations,
			Paged: true, Query: opFilters, Response: wire.Page[wire.Operation]{}}},
		{Method: "GET", Pattern: "/operations/{id}", Handler: s.getOperation, Doc: httpapi.Doc{Summary: "One operation", Tag: tagOperations,
			Response: wire.Operation{}, Problems: []int{http.StatusNotFound}}},
		{Method: "DELETE", Pattern: "/operations/{id}", Handler: s.deleteOperation, Doc: httpapi.Doc{Summary: "Cancel an operation not yet running", Tag: tagOperations,
			Response: wire.Operation{}, Problems: []int{http.StatusNotFound}}},
		{Method: "GET", Pattern: "/events", Handler: s.getEvents, Doc: httpapi.Doc{Summary: "The retained events, newest first", Tag: tagEvents,
			Paged: true, Query: eventlog.FilterParams, Response: wire.Page[wire.Event]{}}},
		{Method: "GET", Pattern: "/configuration", Handler: s.getConfiguration, Doc: docConfig},
		{Method: "GET", Pattern: "/config", Handler: s.getConfiguration, Doc: docConfig},
		{Method: "POST", Pattern: "/configuration/validate", Handler: s.postValidate, Doc: docValidate},
		{Method: "POST", Pattern: "/config/validate", Handler: s.postValidate, Doc: docValidate},
		{Method: "GET", Pattern: "/configuration/draft", Handler: s.getDraft, Doc: httpapi.Doc{Summary: "The saved draft", Tag: tagConfig,
			Response: draftView{}, Problems: []int{http.StatusNotFound, http.StatusServiceUnavailable}}},
		{Method: "PUT", Pattern: "/configuration/draft", Handler: s.putDraft, Doc: httpapi.Doc{Summary: "Save a draft, with its validation report", Tag: tagConfig,
			Request: configBody, RequestMedia: configMedia, Response: draftSaved{}, Problems: []int{http.StatusServiceUnavailable}}},
		{Method: "GET", Pattern: "/configuration/diff", Handler: s.getDiff, Doc: httpapi.Doc{Summary: "Compare two configuration versions", Tag: tagConfig,
			Query: []httpapi.Param{{Name: "from", Description: "A version id or \"draft\"; default the applied version."},
				{Name: "to", Description: "A version id or \"draft\"; default the draft."}},
			Response: DiffReport{}, Problems: []int{http.StatusNotFound, http.StatusServiceUnavailable}}},
		{Method: "GET", Pattern: "/configuration/versions", Handler: s.getVersions, Doc: docVersions},
		{Method: "GET", Pattern: "/config/versions", Handler: s.getVersions, Doc: docVersions},
		{Method: "POST", Pattern: "/configuration/apply", Handler: s.postApply, Doc: docApply},
		{Method: "POST", Pattern: "/config/apply", Handler: s.postApply, Doc: docApply},
		{Method: "POST", Pattern: "/configuration/rollback/{id}", Handler: s.postRollback, Doc: docRollback},
		{Method: "POST", Pattern: "/config/rollback/{id}", Handler: s.postRollback, Doc: docRollback},
		{Method: "GET", Pattern: "/components", Handler: s.getComponents, Doc: httpapi.Doc{Summary: "The registered components", Tag: tagComponents,
			Paged: true, Response: wire.Page[ComponentInfo]{}}},
		{Method: "GET", Pattern: "/components/{kind}/{name}", Handler: s.getComponent, Doc: httpapi.Doc{Summary: "One component's schema and example",
			Tag: tagComponents, Response: ComponentDetail{}, Problems: []int{http.StatusNotFound}}},
		{Method: "GET", Pattern: "/schema", Handler: s.getSchema, Doc: httpapi.Doc{Summary: "The JSON Schema of a configuration", Tag: tagComponents,
			Response: map[string]any{}}},
		// Probes and metrics stay open whatever the token.
		{Method: "GET", Pattern: "/metrics", Handler: s.getMetrics, Public: true, Doc: docMetrics},
		{Method: "GET", Pattern: hc.HealthPath, Handler: s.getHealth, Public: true, Doc: docProbe("Health", true)},
		{Method: "GET", Pattern: hc.ReadinessPath, Handler: s.getReadiness, Public: true, Doc: docProbe("Readiness", true)},
		{Method: "GET", Pattern: hc.LivenessPath, Handler: s.getLiveness, Public: true, Doc: docProbe("Liveness", false)},
		{Method: "GET", Pattern: ob.MetricsPath, Handler: s.getMetrics, Public: true, Doc: docMetrics},
		{Method: "GET", Pattern: ob.ReadyPath, Handler: s.getReadiness, Public: true, Doc: docProbe("Readiness", true)},
		{Method: "GET", Pattern: ob.LivePath, Handler: s.getLiveness, Public: true, Doc: docProbe("Liveness", false)},
	}...)
	// A configured probe path may equal another route's; the first wins.
	seen := map[string]bool{}
	out := routes[:0]
	for _, r := range routes {
		if key := r.Method + " " + r.Pattern; !seen[key] {
			seen[key] = true
			out = append(out, r)
		}
	}
	return out
}

func (s *server) getSystem(w http.ResponseWriter, r *http.Request) error {
	sys := s.n.System()
	if s.agent != nil {
		st := s.agent()
		sys.Agent = &st
	}
	return httpapi.WriteJSON(w, http.StatusOK, sys)
}

func (s *server) getStatus(w http.ResponseWriter, r *http.Request) error {
	return httpapi.WriteJSON(w, http.StatusOK, s.n.Status())
}

func (s *server) getNodes(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate([]View{s.n.View()}, page, size))
}

func (s *server) getNode(w http.ResponseWriter, r *http.Request) error {
	return httpapi.WriteJSON(w, http.StatusOK, s.n.View())
}

func (s *server) getStreams(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(s.n.Streams(), page, size))
}

func (s *server) getStream(w http.ResponseWriter, r *http.Request) error {
	v, err := s.n.Stream(r.PathValue("id"))
	if err != nil {
		return s.problem(err)
	}
	w.Header().Set("ETag", httpapi.ETag(v.Desired.Generation))
	return httpapi.WriteJSON(w, http.StatusOK, v)
}

func (s *server) request(r *http.Request) Request {
	return Request{Actor: httpapi.Principal(r.Context()), CorrelationID: httpapi.CorrelationID(r.Context())}
}

func (s *server) postAction(action string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		// No body is needed; one that is sent must be a JSON object
		// without fields (415 for another media type, 400 otherwise).
		if _, err := httpapi.DecodeOptionalJSON(r, &struct{}{}, MaxBodyBytes); err != nil {
			return err
		}
		id := r.PathValue("id")
		req := s.request(r)
		gen, any, present, err := httpapi.ParseIfMatch(r.Header.Get("If-Match"))
		if err != nil {
			return err
		}
		if present && !any {
			req.IfMatch = &gen
		}
		rec, d, err := s.n.StreamAction(id, action, req)
		if err != nil {
			return s.problem(err, id)
		}
		w.Header().Set("Location", "/operations/"+url.PathEscape(rec.OperationID))
		w.Header().Set("ETag", httpapi.ETag(d.Generation))
		return httpapi.WriteJSON(w, http.StatusAccepted, wire.DesiredStateResponse{
			OperationID: rec.OperationID, IntentID: rec.IntentID, NodeID: rec.NodeID, StreamID: id,
			Generation: d.Generation, DesiredState: d.State, ConfigVersion: d.ConfigVersion, ActionID: d.ActionID,
			Convergence: rec.Convergence,
		})
	}
}

func (s *server) getOperations(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := opFilter{NodeID: q.Get("node_id"), ResourceID: q.Get("resource_id"), Operation: q.Get("operation"), State: q.Get("state"), CorrelationID: q.Get("correlation_id")}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(s.n.Operations(f), page, size))
}

func (s *server) getOperation(w http.ResponseWriter, r *http.Request) error {
	rec, ok := s.n.Operation(r.PathValue("id"))
	if !ok {
		return httpapi.NotFound("operation_not_found", "no operation with that id")
	}
	return httpapi.WriteJSON(w, http.StatusOK, rec)
}

func (s *server) deleteOperation(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.n.CancelOperation(r.PathValue("id"), s.request(r))
	switch {
	case errors.Is(err, errOpNotFound):
		return httpapi.NotFound("operation_not_found", "no operation with that id")
	case errors.Is(err, errOpNotCancellable):
		e := httpapi.Conflict("operation_not_cancellable", "the operation already ran or is running; its outcome stays visible")
		e.Details = map[string]any{"state": rec.State}
		return e
	case err != nil:
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rec)
}

func (s *server) getEvents(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	f, err := eventlog.FilterFromQuery(r.URL.Query())
	if err != nil {
		return httpapi.BadRequest("invalid_query", err.Error())
	}
	return httpapi.WriteJSON(w, http.StatusOK, s.events.Query(f, page, size))
}

// Tags of the Node API document.
const (
	tagNode       = "node"
	tagStreams    = "streams"
	tagJobs       = "jobs"
	tagOperations = "operations"
	tagEvents     = "events"
	tagConfig     = "configuration"
	tagComponents = "components"
	tagProbes     = "probes"
)

// configMedia are the media types of a configuration body.
var configMedia = []string{"application/json", "application/yaml", "text/yaml", "application/x-yaml", "application/toml"}

// configDocument is the JSON envelope of a configuration body.
type configDocument struct {
	Format  string `json:"format"`
	Content string `json:"content"`
}

// configBody is the JSON body of validate and draft: a configuration, or
// the envelope.
var configBody = httpapi.AnyOf{configDocument{}, map[string]any{}}

// draftSaved is the answer of PUT /configuration/draft.
type draftSaved struct {
	Draft  draftView `json:"draft"`
	Report Report    `json:"report"`
}

// versionView is a configuration version on the wire.
type versionView struct {
	ID             string    `json:"id"`
	Format         string    `json:"format"`
	SHA256         string    `json:"sha256"`
	Source         string    `json:"source"`
	RolledBackFrom string    `json:"rolled_back_from,omitempty"`
	HubVersion     string    `json:"hub_version,omitempty"`
	CreatedAt      wire.Time `json:"created_at"`
	Actor          string    `json:"actor,omitempty"`
	CorrelationID  string    `json:"correlation_id,omitempty"`
	Applied        bool      `json:"applied"`
	Content        *string   `json:"content,omitempty"`
}

func viewOf(v history.Version, applied string, withContent bool) versionView {
	vv := versionView{ID: v.ID, Format: string(v.Format), SHA256: v.SHA256, Source: v.Source, RolledBackFrom: v.RolledBackFrom, HubVersion: v.HubVersion,
		CreatedAt: wire.At(v.CreatedAt), Actor: v.Actor, CorrelationID: v.CorrelationID, Applied: v.ID == applied}
	if withContent {
		c := string(v.Content)
		vv.Content = &c
	}
	return vv
}

func (s *server) getConfiguration(w http.ResponseWriter, r *http.Request) error {
	v, err := s.n.Configuration()
	if err != nil {
		return s.problem(err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, viewOf(v, v.ID, true))
}

func (s *server) getVersions(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	vs, err := s.n.Versions()
	if err != nil {
		return s.problem(err)
	}
	applied := s.n.ConfigVersion()
	views := make([]versionView, len(vs))
	for i, v := range vs {
		views[i] = viewOf(v, applied, false)
	}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(views, page, size))
}

// document reads a configuration body: the raw document as YAML
// (application/yaml, text/yaml, application/x-yaml), TOML
// (application/toml) or JSON (application/json), or the JSON envelope
// {"format", "content"}. A JSON object with a "format" or "content" field
// is the envelope (no configuration has either field); any other JSON
// object is a configuration. A reference ({"draft": ...}, {"version": ...})
// is refused: only apply takes one (applyBody).
func document(r *http.Request) (Document, error) {
	doc, ref, err := configRequest(r)
	if err == nil && ref != nil {
		return Document{}, httpapi.BadRequest("invalid_json", `only POST /configuration/apply takes {"draft": true} or {"version": "<id>"}; send a configuration`)
	}
	return doc, err
}

// applyRef names a stored text to apply: the draft or a version.
type applyRef struct {
	Draft   bool   `json:"draft,omitempty"`
	Version string `json:"version,omitempty"`
}

// configRequest reads a configuration body (see document) or, for a JSON
// object with a "draft" or "version" field, a reference to a stored text.
func configRequest(r *http.Request) (Document, *applyRef, error) {
	mt, body, err := httpapi.ReadBody(r, MaxBodyBytes, "application/json", "application/yaml", "text/yaml", "application/x-yaml", "application/toml")
	if err != nil {
		return Document{}, nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return Document{}, nil, httpapi.BadRequest("invalid_json", "a configuration body is required")
	}
	mt, _, _ = mime.ParseMediaType(mt)
	switch mt {
	case "application/yaml", "text/yaml", "application/x-yaml":
		return Document{Format: config.YAML, Content: body}, nil, nil
	case "application/toml":
		return Document{Format: config.TOML, Content: body}, nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return Document{}, nil, httpapi.BadRequest("invalid_json", "the body must be a JSON object: a configuration, {\"format\", \"content\"}, or for apply {\"draft\": true} or {\"version\": \"<id>\"}")
	}
	_, format := fields["format"]
	_, content := fields["content"]
	_, draft := fields["draft"]
	_, version := fields["version"]
	// The shared decoder names an unknown field and rejects trailing data.
	r.Body = io.NopCloser(bytes.NewReader(body))
	switch {
	case format || content:
		var in configDocument
		if err := httpapi.DecodeJSON(r, &in, MaxBodyBytes); err != nil {
			return Document{}, nil, err
		}
		f, err := config.ParseFormat(in.Format)
		if err != nil {
			return Document{}, nil, httpapi.Validation([]httpapi.FieldProblem{{Path: "format", Message: "must be yaml, json or toml"}})
		}
		return Document{Format: f, Content: []byte(in.Content)}, nil, nil
	case draft || version:
		var ref applyRef
		if err := httpapi.DecodeJSON(r, &ref, MaxBodyBytes); err != nil {
			return Document{}, nil, err
		}
		switch {
		case ref.Draft && ref.Version != "":
			return Document{}, nil, httpapi.Validation([]httpapi.FieldProblem{{Path: "version", Message: "give draft or version, not both"}})
		case draft && !ref.Draft:
			return Document{}, nil, httpapi.Validation([]httpapi.FieldProblem{{Path: "draft", Message: "must be true (or leave it out and name a version)"}})
		case version && ref.Version == "":
			return Document{}, nil, httpapi.Validation([]httpapi.FieldProblem{{Path: "version", Message: "must name a version, e.g. v3"}})
		}
		return Document{}, &ref, nil
	}
	return Document{Format: config.JSON, Content: body}, nil, nil
}

func (s *server) postValidate(w http.ResponseWriter, r *http.Request) error {
	doc, err := document(r)
	if err != nil {
		return err
	}
	rep, _ := s.n.Validate(doc)
	return httpapi.WriteJSON(w, http.StatusOK, rep)
}

// draftView is the draft on the wire.
type draftView struct {
	Format    string    `json:"format"`
	Content   string    `json:"content"`
	SHA256    string    `json:"sha256"`
	UpdatedAt wire.Time `json:"updated_at"`
}

func (s *server) getDraft(w http.ResponseWriter, r *http.Request) error {
	d, ok, err := s.n.Draft()
	if err != nil {
		return s.problem(err)
	}
	if !ok {
		return httpapi.NotFound("not_found", "no draft saved")
	}
	return httpapi.WriteJSON(w, http.StatusOK, draftView{Format: string(d.Format), Content: string(d.Content), SHA256: d.SHA256, UpdatedAt: wire.At(d.UpdatedAt)})
}

func (s *server) putDraft(w http.ResponseWriter, r *http.Request) error {
	doc, err := document(r)
	if err != nil {
		return err
	}
	d, rep, err := s.n.SaveDraft(doc)
	if err != nil {
		return s.problem(err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, draftSaved{draftView{Format: string(d.Format), Content: string(d.Content), SHA256: d.SHA256, UpdatedAt: wire.At(d.UpdatedAt)}, rep})
}

func (s *server) getDiff(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	rep, err := s.n.Diff(q.Get("from"), q.Get("to"))
	if err != nil {
		return s.problem(err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, rep)
}

func (s *server) accepted(w http.ResponseWriter, rec wire.Operation) error {
	w.Header().Set("Location", "/operations/"+url.PathEscape(rec.OperationID))
	return httpapi.WriteJSON(w, http.StatusAccepted, rec)
}

// postApply applies a configuration sent in the body, the saved draft
// ({"draft": true}) or a stored version ({"version": "v3"}).
func (s *server) postApply(w http.ResponseWriter, r *http.Request) error {
	doc, ref, err := configRequest(r)
	if err != nil {
		return err
	}
	var rec wire.Operation
	switch {
	case ref == nil:
		rec, err = s.n.Apply(doc, s.request(r))
	case ref.Draft:
		rec, err = s.n.ApplyDraft(s.request(r))
	default:
		rec, err = s.n.ApplyVersion(ref.Version, s.request(r))
	}
	if err != nil {
		return s.problem(err)
	}
	return s.accepted(w, rec)
}

func (s *server) postRollback(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.n.Rollback(r.PathValue("id"), s.request(r))
	if err != nil {
		return s.problem(err)
	}
	return s.accepted(w, rec)
}

func (s *server) getComponents(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(s.n.Components(), page, size))
}

func (s *server) getComponent(w http.ResponseWriter, r *http.Request) error {
	d, ok := s.n.Component(r.PathValue("kind"), r.PathValue("name"))
	if !ok {
		return httpapi.NotFound("component_not_found", "no "+r.PathValue("kind")+" component named "+r.PathValue("name"))
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}

func (s *server) getSchema(w http.ResponseWriter, r *http.Request) error {
	return httpapi.WriteJSON(w, http.StatusOK, s.schema)
}

func (s *server) getMetrics(w http.ResponseWriter, r *http.Request) error {
	s.metrics.ServeHTTP(w, r)
	return nil
}

func probe(w http.ResponseWriter, p Probe, ok bool) error {
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	return httpapi.WriteJSON(w, status, p)
}

func (s *server) getHealth(w http.ResponseWriter, r *http.Request) error {
	p, ok := s.n.Health()
	return probe(w, p, ok)
}

func (s *server) getReadiness(w http.ResponseWriter, r *http.Request) error {
	p, ok := s.n.Readiness()
	return probe(w, p, ok)
}

func (s *server) getLiveness(w http.ResponseWriter, r *http.Request) error {
	return probe(w, s.n.Liveness(), true)
}

// problem maps the node's errors to problems. Messages never carry a
// secret, a token or a file path.
func (s *server) problem(err error, streamID ...string) error {
	var gc *GenerationConflictError
	var ve *ValidationError
	switch {
	case errors.As(err, &gc):
		res := map[string]any{"node_id": s.n.ID()}
		if len(streamID) > 0 {
			res["stream_id"] = streamID[0]
		}
		return httpapi.GenerationConflict(gc.Expected, gc.Current, res)
	case errors.As(err, &ve):
		ps := make([]httpapi.FieldProblem, len(ve.Report.Errors))
		for i, p := range ve.Report.Errors {
			ps[i] = httpapi.FieldProblem{Path: p.Path, Message: p.Message}
		}
		e := httpapi.Validation(ps)
		if n := config.TotalProblems(ve.Report.Errors); n > len(ps) {
			e.Message = fmt.Sprintf("the request is invalid: %d problems (the first %d listed)", n, config.MaxProblems)
		}
		return e
	case errors.Is(err, ErrJobNotFound):
		return httpapi.NotFound("job_not_found", "no job with that id on this node")
	case errors.Is(err, ErrJobManagedByHub):
		return httpapi.Conflict("job_managed_by_hub", "the Hub placed this job: change it through the Hub (PUT {hub}/api/v1/jobs/{id}/desired-state, POST .../checkpoints, .../savepoints)")
	case errors.Is(err, ErrJobRunning):
		return httpapi.Conflict("job_running", "the job is running: a recovery mode applies to a start; POST /jobs/{id}/restart with it")
	case errors.Is(err, ErrNoCheckpointing):
		return httpapi.Conflict("no_checkpointing", "the job has no checkpoint configuration: it takes no checkpoints or savepoints")
	case errors.Is(err, ErrJobNotRunning):
		return httpapi.Conflict("job_not_running", "the job is not running: start it first")
	case errors.Is(err, ErrStreamNotFound):
		return httpapi.NotFound("stream_not_found", "no stream with that id on this node")
	case errors.Is(err, ErrNoDraft):
		return httpapi.NotFound("not_found", "no draft saved: PUT /configuration/draft first")
	case errors.Is(err, ErrVersionNotFound):
		return httpapi.NotFound("configuration_version_not_found", strings.TrimPrefix(err.Error(), ErrVersionNotFound.Error()+": "))
	case errors.Is(err, history.ErrNotFound):
		return httpapi.NotFound("configuration_version_not_found", "no applied configuration version")
	case errors.Is(err, errNoHistory):
		return httpapi.Unavailable("unavailable", "the configuration history is not available")
	case errors.Is(err, history.ErrStorage):
		return httpapi.Unavailable("storage_unavailable", "the configuration history cannot be written").WithCause(err)
	}
	return err
}
