package hub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/rollout"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/wire"
)

// Problem and failure codes of the configuration routes.
const (
	CodeConfigVersionNotFound = "configuration_version_not_found"
	// CodeSecretUnresolved fails a configuration intent, before dispatch,
	// when a ${secret:} reference of it cannot resolve anywhere (an empty
	// or invalid name). One the Hub does not hold is the node's to resolve.
	CodeSecretUnresolved = "secret_unresolved"
)

// Audit actions of the configuration routes.
const (
	actionConfigApply    = "configuration_apply"
	actionConfigRollback = "configuration_rollback"
	actionConfigValidate = "configuration_validate"
	actionConfigDiff     = "configuration_diff"
	actionConfigReassert = "configuration_reassert"
)

// configRoutes are the node configuration routes (docs/hub-api.md
// "Configuration").
func (h *Hub) configRoutes(p string) []httpapi.Route {
	n := p + "/nodes/{node_id}/configuration"
	command := func(summary string, body any, etag bool) httpapi.Doc {
		return httpapi.Doc{Summary: summary, Tag: tagConfig, Request: body, RequestMedia: configMedia, Status: http.StatusAccepted,
			Response: wire.Operation{}, Location: true, ETag: etag, IfMatch: etag, Problems: []int{http.StatusNotFound, http.StatusConflict}}
	}
	diff := command("Diff two Hub versions of the node's configuration, on the node", nil, false)
	diff.Query = []httpapi.Param{{Name: "from", Description: "Default the version the node reports."}, {Name: "to", Description: "Default the desired version."}}
	rollback := command("Apply a stored version again", nil, true)
	return []httpapi.Route{
		{Method: "GET", Pattern: n, Handler: h.getNodeConfiguration, Doc: httpapi.Doc{Summary: "The node's configuration: desired, reported, convergence",
			Tag: tagConfig, Response: wire.NodeConfiguration{}, ETag: true, Problems: []int{http.StatusNotFound}}},
		{Method: "GET", Pattern: n + "/versions", Handler: h.getConfigVersions, Doc: httpapi.Doc{Summary: "The Hub's versions of the node's configuration",
			Tag: tagConfig, Paged: true, Response: wire.Page[wire.ConfigVersion]{}, Problems: []int{http.StatusNotFound}}},
		{Method: "POST", Pattern: n + "/validate", Handler: h.audited(fixedAction(actionConfigValidate), h.postConfigValidate),
			Doc: command("Validate a configuration on the node", wire.ConfigDocument{}, false)},
		{Method: "GET", Pattern: n + "/diff", Handler: h.audited(fixedAction(actionConfigDiff), h.getConfigDiff), Doc: diff},
		{Method: "POST", Pattern: n + "/apply", Handler: h.audited(fixedAction(actionConfigApply), h.postConfigApply),
			Doc: command("Apply a configuration, or a stored version (config_version)", wire.ConfigApplyRequest{}, true)},
		{Method: "POST", Pattern: n + "/rollback/{version}", Handler: h.audited(fixedAction(actionConfigRollback), h.postConfigRollback), Doc: rollback},
	}
}

// configMedia are the media types of a configuration body: the JSON
// envelope, or the raw YAML or TOML document.
var configMedia = []string{httpapi.MediaTypeJSON, "application/yaml", "text/yaml", "application/toml"}

// readConfigBody reads a configuration request: the raw document
// (application/yaml, text/yaml, application/toml) or the JSON envelope
// {"format", "content"} (or, where byVersion, {"config_version"}).
func readConfigBody(r *http.Request, byVersion bool) (wire.ConfigApplyRequest, error) {
	var req wire.ConfigApplyRequest
	mt, body, err := httpapi.ReadBody(r, MaxBodyBytes, httpapi.MutationMediaTypes...)
	if err != nil {
		return req, err
	}
	mt, _, _ = mime.ParseMediaType(mt)
	switch mt {
	case "application/yaml", "text/yaml":
		return wire.ConfigApplyRequest{Format: string(config.YAML), Content: string(body)}, nil
	case "application/toml":
		return wire.ConfigApplyRequest{Format: string(config.TOML), Content: string(body)}, nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err := httpapi.DecodeJSON(r, &req, MaxBodyBytes); err != nil {
		return req, err
	}
	if req.ConfigVersion != "" {
		switch {
		case !byVersion:
			return req, httpapi.Validation([]httpapi.FieldProblem{{Path: "config_version", Message: "send a configuration: {format, content}"}})
		case req.Format != "" || req.Content != "":
			return req, httpapi.Validation([]httpapi.FieldProblem{{Path: "config_version", Message: "give a configuration or a config_version, not both"}})
		}
		return req, nil
	}
	if probs := CheckConfigDocument("", req.Format, req.Content); len(probs) > 0 {
		return req, httpapi.Validation(probs)
	}
	return req, nil
}

// CheckConfigDocument checks what the Hub can of a configuration it is
// given for nodes (path names the document's field, "" at the top): a
// known format, a text that parses, and no health_check section, which is
// node-local (each node keeps the one of its --config file). The nodes
// validate the rest with their own registry and secrets.
func CheckConfigDocument(path, format, content string) []httpapi.FieldProblem {
	at := func(f string) string {
		if path == "" {
			return f
		}
		return path + "." + f
	}
	f, err := config.ParseFormat(format)
	if err != nil {
		return []httpapi.FieldProblem{{Path: at("format"), Message: "must be yaml, json or toml"}}
	}
	if strings.TrimSpace(content) == "" {
		return []httpapi.FieldProblem{{Path: at("content"), Message: "a configuration is required"}}
	}
	if len(content) > config.MaxSize {
		return []httpapi.FieldProblem{{Path: at("content"), Message: fmt.Sprintf("at most %d bytes", config.MaxSize)}}
	}
	tree, err := config.Tree([]byte(content), f)
	if err != nil {
		return []httpapi.FieldProblem{{Path: at("content"), Message: "not a " + format + " document: " + err.Error()}}
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return []httpapi.FieldProblem{{Path: at("content"), Message: "the document must be a mapping"}}
	}
	if _, ok := m[config.NodeLocal]; ok {
		return []httpapi.FieldProblem{{Path: at("content") + ": " + config.NodeLocal, Message: config.NodeLocal + " is node-local: each node keeps the one of its --config file; remove it from the document"}}
	}
	if _, ok := m[config.RemotePolicySection]; ok {
		// The node would refuse it as well (policy_denied): what the
		// Hub's work may do on a node is its owner's to say.
		return []httpapi.FieldProblem{{Path: at("content") + ": " + config.RemotePolicySection, Message: config.RemotePolicySection + " is node-local: each node keeps the one of its --config file and the Hub cannot set it; remove it from the document"}}
	}
	return nil
}

// configDocSHA is the hex SHA-256 of a configuration text.
func configDocSHA(content string) string {
	s := sha256.Sum256([]byte(content))
	return hex.EncodeToString(s[:])
}

// knownNode answers 404 node_not_found for a node that never registered.
func (h *Hub) knownNode(id string) error {
	if _, ok := h.fleet.Node(id); !ok {
		return httpapi.NotFound(CodeNodeNotFound, "no node with this id has registered with the Hub")
	}
	return nil
}

func (h *Hub) getNodeConfiguration(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("node_id")
	if err := h.knownNode(id); err != nil {
		return err
	}
	ctx := r.Context()
	ncs, err := h.st.NodeConfigs(ctx, []string{id})
	if err != nil {
		return problemFor(err, anyResource)
	}
	nc := ncs[id]
	nc.NodeID = id
	v := wire.NodeConfiguration{NodeID: id, Convergence: wire.ConvergenceUnknown, ConvergenceReason: reconcile.ReasonNoDesired}
	if o := nc.Observed; o != nil {
		stale := !h.fleet.Observing(id)
		v.Reported = &wire.NodeConfigurationReported{ReportConfiguration: o.ReportConfiguration, ReportedAt: wire.At(o.ReportedAt), Stale: stale}
	}
	if d := nc.Desired; d != nil {
		res := h.convergenceOf(configState(nc), h.opts.Now())
		v.Convergence, v.ConvergenceReason = res.Value, res.Reason
		v.Desired = &wire.NodeConfigurationDesired{ConfigVersion: d.ConfigVersion, Generation: d.Generation, UpdatedAt: wire.At(d.UpdatedAt)}
		if d.ConfigVersion != "" {
			cv, err := h.st.GetConfigVersion(ctx, id, d.ConfigVersion)
			if err != nil {
				return problemFor(err, anyResource)
			}
			v.Desired.Format, v.Desired.Content = cv.Format, maskedContent(cv.Format, cv.Content)
		} else if nc.Latest != nil {
			var p wire.ConfigCommand
			_ = json.Unmarshal(nc.Latest.Payload, &p)
			v.Desired.NodeVersion = p.NodeVersion
		}
		if nc.Latest != nil {
			v.OperationID = nc.Latest.ID
		}
		w.Header().Set("ETag", httpapi.ETag(d.Generation))
	} else {
		w.Header().Set("ETag", httpapi.ETag(0))
	}
	return httpapi.WriteJSON(w, http.StatusOK, v)
}

// configState is a node's configuration as a resource state, for the one
// convergence rule.
func configState(nc store.NodeConfig) store.ResourceState {
	rs := store.ResourceState{Latest: nc.Latest, ObservedConfig: nc.Observed}
	if nc.Desired != nil {
		rs.Resource = *nc.Desired
	} else {
		rs.Resource = store.Resource{NodeID: nc.NodeID, Kind: store.KindConfiguration, ResourceID: wire.ConfigResource}
	}
	return rs
}

// maskedContent is a stored text with its literal credentials masked, as
// the Node API serves configurations: references stay as written.
func maskedContent(format, content string) string {
	f, err := config.ParseFormat(format)
	if err != nil {
		return content
	}
	return string(config.MaskCredentials([]byte(content), f))
}

func configVersionView(v store.ConfigVersion) wire.ConfigVersion {
	return wire.ConfigVersion{Version: v.Version, NodeID: v.NodeID, Format: v.Format, Content: maskedContent(v.Format, v.Content),
		SHA256: v.SHA256, Source: v.Source, RolloutID: v.RolloutID, Actor: v.Actor, ActorKind: v.ActorKind, CorrelationID: v.CorrelationID,
		CreatedAt: wire.At(v.CreatedAt)}
}

func (h *Hub) getConfigVersions(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("node_id")
	if err := h.knownNode(id); err != nil {
		return err
	}
	p, err := paging(r)
	if err != nil {
		return err
	}
	page, err := h.st.ConfigVersions(r.Context(), id, p)
	if err != nil {
		return problemFor(err, anyResource)
	}
	out := wire.Page[wire.ConfigVersion]{Items: make([]wire.ConfigVersion, len(page.Items)), Page: page.Page, PageSize: page.PageSize, Total: page.Total}
	// The newest of the node's recent applies per version: a version whose
	// apply failed says so, and the console offers it as no target.
	applies, err := h.st.ListIntents(r.Context(), store.IntentFilter{NodeID: id, ResourceID: wire.ConfigResource, Operation: wire.CommandConfigApply},
		store.Paging{Page: 1, PageSize: store.MaxPageSize})
	if err != nil {
		return problemFor(err, anyResource)
	}
	state := map[string]string{}
	for _, in := range applies.Items {
		if _, ok := state[in.ConfigVersion]; !ok && in.ConfigVersion != "" {
			state[in.ConfigVersion] = in.State
		}
	}
	for i, v := range page.Items {
		out.Items[i] = configVersionView(v)
		out.Items[i].ApplyState = state[v.Version]
	}
	return httpapi.WriteJSON(w, http.StatusOK, out)
}

// postConfigValidate sends a candidate to one node as a read-only
// configuration_validate command; the node's report lands on the
// operation's result.
func (h *Hub) postConfigValidate(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("node_id")
	req, err := readConfigBody(r, false)
	if err != nil {
		return err
	}
	if err := h.knownNode(id); err != nil {
		return err
	}
	return h.writeConfigCommand(w, r, id, wire.CommandConfigValidate, wire.ConfigCommand{Format: req.Format, Content: req.Content})
}

// getConfigDiff asks one node to diff two Hub versions of it (from:
// default the version it reports; to: default the desired one) as a
// read-only configuration_diff command; the report lands on the
// operation's result.
func (h *Hub) getConfigDiff(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("node_id")
	if err := h.knownNode(id); err != nil {
		return err
	}
	ctx := r.Context()
	q := r.URL.Query()
	from, to := q.Get("from"), q.Get("to")
	if from == "" || to == "" {
		ncs, err := h.st.NodeConfigs(ctx, []string{id})
		if err != nil {
			return problemFor(err, anyResource)
		}
		nc := ncs[id]
		if from == "" && nc.Observed != nil {
			from = nc.Observed.HubVersion
		}
		if to == "" && nc.Desired != nil {
			to = nc.Desired.ConfigVersion
		}
	}
	for _, q := range [][2]string{{"from", from}, {"to", to}} {
		if q[1] == "" {
			e := httpapi.BadRequest(httpapi.CodeInvalidQuery, q[0]+": name a Hub version of this node (there is none to default to)")
			e.Details = map[string]any{"parameter": q[0]}
			return e
		}
	}
	var sides [2]*wire.ConfigDiffSide
	for i, v := range []string{from, to} {
		cv, err := h.st.GetConfigVersion(ctx, id, v)
		if err != nil {
			return problemFor(err, aConfigVersion(v))
		}
		sides[i] = &wire.ConfigDiffSide{Version: cv.Version, ConfigDocument: wire.ConfigDocument{Format: cv.Format, Content: cv.Content}}
	}
	return h.writeConfigCommand(w, r, id, wire.CommandConfigDiff, wire.ConfigCommand{From: sides[0], To: sides[1]})
}

// writeConfigCommand stores a read-only configuration command and answers
// 202 with its operation.
func (h *Hub) writeConfigCommand(w http.ResponseWriter, r *http.Request, nodeID, op string, cc wire.ConfigCommand) error {
	payload, err := json.Marshal(wire.CommandPayload{ConfigCommand: cc})
	if err != nil {
		return err
	}
	return h.accept(w, r, intentWrite{about: anyResource, commit: func(ctx context.Context, m intentMeta) (committed, error) {
		in, err := h.st.WriteConfigCommand(ctx, store.ConfigCommandWrite{IntentID: m.id, Operation: op, NodeID: nodeID,
			Payload: payload, Action: m.action, CorrelationID: m.correlationID, Actor: m.by.id, ActorKind: m.by.kind,
			Now: m.now, ExpiresAt: m.expiresAt})
		if err != nil {
			return committed{}, err
		}
		return committed{operationID: in.ID, nodes: []string{nodeID},
			body: func(string) any { return h.operationOf(in, nil, m.now) }}, nil
	}})
}

func (h *Hub) postConfigApply(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("node_id")
	req, err := readConfigBody(r, true)
	if err != nil {
		return err
	}
	if err := h.knownNode(id); err != nil {
		return err
	}
	cw := store.ConfigWrite{NodeID: id}
	if req.ConfigVersion != "" {
		cw.Version = req.ConfigVersion
	} else {
		cw.Format, cw.Content, cw.Source = req.Format, req.Content, wire.ConfigSourceAPI
	}
	return h.writeConfig(w, r, cw)
}

func (h *Hub) postConfigRollback(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("node_id")
	if err := h.knownNode(id); err != nil {
		return err
	}
	return h.writeConfig(w, r, store.ConfigWrite{NodeID: id, Version: r.PathValue("version")})
}

// writeConfig commits an apply or a rollback (If-Match, Idempotency-Key
// by the middleware) and answers 202 with the operation, Location and
// ETag.
func (h *Hub) writeConfig(w http.ResponseWriter, r *http.Request, cw store.ConfigWrite) error {
	return h.accept(w, r, intentWrite{about: aConfigVersion(cw.Version), conditional: true,
		conflict: map[string]any{"node_id": cw.NodeID, "resource": wire.ConfigResource},
		commit: func(ctx context.Context, m intentMeta) (committed, error) {
			cw.IntentID, cw.IfMatch, cw.Action, cw.CorrelationID, cw.Actor, cw.ActorKind = m.id, m.ifMatch, m.action, m.correlationID, m.by.id, m.by.kind
			cw.Now, cw.ExpiresAt = m.now, m.expiresAt
			res, err := h.st.WriteConfig(ctx, cw)
			if err != nil {
				return committed{}, err
			}
			return committed{operationID: res.Intent.ID, nodes: []string{cw.NodeID}, etag: httpapi.ETag(res.Generation),
				converge: func() { h.converge(cw.NodeID, wire.ConfigResource) },
				body: func(string) any {
					op := h.operationOf(res.Intent, nil, m.now)
					op.Convergence = wire.ConvergencePending // accepted, not dispatched yet
					return op
				}}, nil
		}})
}

// configKind reports whether an intent kind is a configuration's.
func configKind(kind string) bool {
	return kind == store.KindConfiguration || kind == store.KindConfigCommand
}

// configCommand completes the payload of a configuration command at
// dispatch: the text of the Hub version an apply names, and the values of
// the ${secret:} references of the text to validate or apply, from the
// Hub's SVC_SECRET_<NAME>. These values live only in the command sent to
// the node. A reference the Hub does not hold is left for the node to
// resolve from its own SVC_SECRET_<NAME> (spec secrets rule 6): the node
// validates and applies it, or fails naming its path and reference. A
// failure (a reference that cannot resolve anywhere, a version gone)
// fails the intent before anything is dispatched.
func (h *Hub) configCommand(ctx context.Context, cmd *wire.Command) *wire.Failure {
	p := &cmd.Payload.ConfigCommand
	if cmd.Operation == wire.CommandConfigApply && p.NodeVersion == "" {
		cv, err := h.st.GetConfigVersion(ctx, cmd.NodeID, cmd.ConfigVersion)
		if err != nil {
			return &wire.Failure{Class: "permanent", Code: CodeConfigVersionNotFound, Message: "the Hub keeps no version " + cmd.ConfigVersion + " for this node"}
		}
		p.Format, p.Content = cv.Format, cv.Content
	}
	if p.Content == "" {
		return nil
	}
	secrets, err := h.hubSecrets(p.Format, p.Content)
	if err != nil {
		return &wire.Failure{Class: "permanent", Code: CodeSecretUnresolved, Message: "a secret reference cannot be resolved: " + err.Error()}
	}
	if len(secrets) > 0 {
		p.Secrets = secrets
	}
	return nil
}

// hubSecrets pre-resolves the ${secret:NAME} references of a configuration
// text from the Hub's SVC_SECRET_<NAME> variables; those it does not hold
// are the node's (see configCommand). The error names the path and
// reference of each one that cannot resolve anywhere (a malformed
// reference, a text that does not parse), never a value.
func (h *Hub) hubSecrets(format, content string) (map[string]string, error) {
	f, err := config.ParseFormat(format)
	if err != nil {
		return nil, err
	}
	tree, err := config.Tree([]byte(content), f)
	if err != nil {
		return nil, err
	}
	lookup := h.opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	secrets, _, err := secretref.Resolver{LookupEnv: lookup}.SecretsDeferring(tree)
	if err != nil {
		return nil, err
	}
	return secrets, nil
}

// configObservations is what the rollout state machine sees of nodes now:
// liveness and mode, whether each node's configuration converged in_sync
// at the node's rollout generation, whether a stream of it is failed, and
// whether the apply intent of that generation failed for good.
func (h *Hub) configObservations(ctx context.Context, nodes []rollout.Node, now time.Time) (map[string]rollout.Observation, error) {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.NodeID
	}
	ncs, err := h.st.NodeConfigs(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]rollout.Observation, len(nodes))
	for _, rn := range nodes {
		nc := ncs[rn.NodeID]
		nc.NodeID = rn.NodeID
		var o rollout.Observation
		if ns, ok := h.fleet.Node(rn.NodeID); ok {
			o.Online, o.Mode = ns.Online, ns.Mode
			o.StreamFailed = slices.ContainsFunc(ns.Observed, func(s store.ObservedStream) bool { return s.State == reconcile.ObservedFailed })
			o.CurrentNodeVersion = ns.ConfigVersion
		}
		if o.Mode == "" {
			o.Mode = wire.NodeModeActive
		}
		if ob := nc.Observed; ob != nil {
			o.CurrentVersion = ob.HubVersion
			if ob.NodeVersion != "" {
				o.CurrentNodeVersion = ob.NodeVersion
			}
		}
		if d := nc.Desired; d != nil && rn.Generation > 0 && d.Generation == rn.Generation {
			res := h.convergenceOf(configState(nc), now)
			o.InSync = res.Value == wire.ConvergenceInSync
		}
		if l := nc.Latest; l != nil && rn.Generation > 0 && l.Generation == rn.Generation && l.State == wire.OpFailed {
			o.ApplyFailed = true
			if l.Failure != nil {
				o.FailureCode, o.FailureMsg = l.Failure.Code, l.Failure.Message
			}
		}
		out[rn.NodeID] = o
	}
	return out, nil
}

// reassertConfig re-sends the desired configuration to a node that came
// back from a restart without it: its report names another Hub version
// (or none) although the last apply succeeded, as when the node could not
// resolve the ${secret:} values the Hub had sent (they are never stored on
// the node) and booted its --config file instead.
func (h *Hub) reassertConfig(ctx context.Context, nodeID string, now time.Time) {
	ncs, err := h.st.NodeConfigs(ctx, []string{nodeID})
	if err != nil {
		h.storeFailed(err)
		return
	}
	nc := ncs[nodeID]
	d, l, o := nc.Desired, nc.Latest, nc.Observed
	if d == nil || d.ConfigVersion == "" || l == nil || l.Generation != d.Generation || l.State != wire.OpSucceeded {
		return
	}
	if o != nil && o.HubVersion == d.ConfigVersion && o.Generation == d.Generation {
		return
	}
	_, err = h.st.WriteConfig(ctx, store.ConfigWrite{IntentID: h.opts.NewID(), NodeID: nodeID, Version: d.ConfigVersion,
		Action: actionConfigReassert, Actor: hubActor.id, ActorKind: hubActor.kind, CorrelationID: l.CorrelationID, Now: now,
		ExpiresAt: now.Add(h.opts.Settings.IntentTTL)})
	if err != nil {
		h.storeFailed(err)
		return
	}
	h.log.Info("hub: configuration re-sent to a restarted node", "node_id", nodeID, "config_version", d.ConfigVersion)
	h.accepted(nodeID)
}

// configApplied records a configuration_applied event when a node reports
// a configuration_apply done: which Hub version it runs now, its own id of
// it, and what the diff-apply did.
func (h *Hub) configApplied(ctx context.Context, in store.Intent, state string, result json.RawMessage, now time.Time) {
	if in.Kind != store.KindConfiguration || state != wire.ResultSucceeded {
		return
	}
	var res wire.ConfigApplyResult
	_ = json.Unmarshal(result, &res)
	version := in.ConfigVersion
	if version == "" {
		version = "its own " + res.NodeVersion
	}
	ev := wire.Event{Kind: wire.EventConfigurationApplied, OccurredAt: wire.At(now), NodeID: in.NodeID, ResourceID: wire.ConfigResource,
		OperationID: in.ID, CorrelationID: in.CorrelationID, Actor: in.Actor, ActorKind: in.ActorKind, Outcome: "applied",
		Message: "configuration " + version + " applied",
		Data: map[string]any{"config_version": in.ConfigVersion, "node_version": res.NodeVersion, "generation": in.Generation,
			"added": len(res.Added), "removed": len(res.Removed), "changed": len(res.Changed)}}
	if err := h.st.AppendEvents(ctx, []wire.Event{ev}); err != nil {
		h.storeFailed(err)
	}
}
