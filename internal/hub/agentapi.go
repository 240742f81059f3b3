package hub

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/fleet"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// Agent protocol limits and defaults.
const (
	defaultLeaseTTL   = fleet.DefaultLeaseTTL
	defaultSessionTTL = time.Hour
	minLeaseTTL       = 100 * time.Millisecond
	minSessionTTL     = time.Second
	// CodeSessionExpired answers an agent call whose session is expired,
	// replaced or unknown: the Agent registers again.
	CodeSessionExpired = "session_expired"
	// principalNode is the principal of an Agent call, followed by the node id.
	principalNode = "node:"
)

func (h *Hub) agentRoutes(p string) []httpapi.Route {
	register := httpapi.BearerToken(h.opts.Settings.NodeToken, "node")
	session := h.sessionAuth
	doc := func(summary string, req, resp any) httpapi.Doc {
		return httpapi.Doc{Summary: summary, Tag: tagAgent, Request: req, Response: resp, Security: securitySession}
	}
	reg := doc("Register a node: a session token for the other agent calls", wire.RegisterRequest{}, wire.RegisterResponse{})
	reg.Security = securityNode
	// 429 capacity: the address registers too fast; 503 capacity: the Hub
	// holds SVC_HUB_MAX_NODES nodes (a common status of the surface).
	reg.Problems = []int{http.StatusForbidden, http.StatusTooManyRequests}
	report := doc("Report the node's streams and configuration (204 also when not newer)", wire.Report{}, nil)
	report.Status = http.StatusNoContent
	jobs := doc("Report the node's job observations (204 also when not newer)", wire.JobObservations{}, nil)
	jobs.Status = http.StatusNoContent
	commands := doc("Long-poll the node's commands", nil, wire.Page[wire.Command]{})
	commands.Query = []httpapi.Param{{Name: "wait_ms", Type: "integer", Description: "Wait up to this long for a command (0 to 30000)."}}
	result := doc("Report a command attempt's outcome", wire.CommandResult{}, nil)
	result.Status, result.Problems = http.StatusNoContent, []int{http.StatusNotFound, http.StatusConflict}
	taps := doc("Long-poll the live taps waiting for the node", nil, wire.Page[wire.TapRequest]{})
	taps.Query = commands.Query
	samples := doc("Push a live tap's sampled messages (410 once nobody reads it)", wire.TapBatch{}, nil)
	samples.Status, samples.Problems = http.StatusNoContent, []int{http.StatusGone}
	return []httpapi.Route{
		{Method: "POST", Pattern: p + "/agent/register", Handler: h.postRegister, Auth: register, NoIdempotencyKey: true, Doc: reg},
		{Method: "POST", Pattern: p + "/agent/heartbeat", Handler: h.postHeartbeat, Auth: session, NoIdempotencyKey: true,
			Doc: doc("Renew the node's lease", wire.HeartbeatRequest{}, wire.HeartbeatResponse{})},
		{Method: "POST", Pattern: p + "/agent/report", Handler: h.postReport, Auth: session, NoIdempotencyKey: true, Doc: report},
		{Method: "POST", Pattern: p + "/agent/job-observations", Handler: h.postJobObservations, Auth: session, NoIdempotencyKey: true, Doc: jobs},
		{Method: "GET", Pattern: p + "/agent/commands", Handler: h.getCommands, Auth: session, Doc: commands},
		{Method: "GET", Pattern: p + "/agent/taps", Handler: h.getAgentTaps, Auth: session, Doc: taps},
		{Method: "POST", Pattern: p + "/agent/taps/{id}/samples", Handler: h.postAgentTapSamples, Auth: session, NoIdempotencyKey: true, Doc: samples},
		{Method: "POST", Pattern: p + "/agent/commands/{id}/result", Handler: h.postCommandResult, Auth: session, NoIdempotencyKey: true, Doc: result},
	}
}

// sessionAuth authenticates an agent call by its session token. Any token
// that is not a live session (unknown, replaced or expired) answers 401
// session_expired, so the Agent registers again.
func (h *Hub) sessionAuth(r *http.Request) (string, error) {
	tok, ok := httpapi.BearerCredential(r)
	if !ok {
		return "", httpapi.Unauthorized(httpapi.CodeUnauthorized, "a session token is required; register first")
	}
	now := h.opts.Now()
	s, cached := h.fleet.Session(tok)
	if !cached {
		got, err := h.st.LookupSession(r.Context(), tok, now)
		switch {
		case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrSessionExpired):
			return "", expiredSession()
		case err != nil:
			return "", problemFor(err, anyResource)
		}
		if !h.boundSession(got) {
			// Made with another node token (rotated since) or before
			// node identity: the Agent registers with what is in force.
			return "", expiredSession()
		}
		s = fleet.Session{NodeID: got.NodeID, ExpiresAt: got.ExpiresAt}
		h.fleet.CacheSession(tok, s)
	}
	if !now.Before(s.ExpiresAt) {
		h.fleet.DropSession(tok)
		return "", expiredSession()
	}
	if err := h.checkClientCert(r, s.NodeID); errors.Is(err, errNotNamed) {
		return "", errIdentity(s.NodeID, err.Error())
	} else if err != nil {
		return "", err
	}
	return principalNode + s.NodeID, nil
}

func expiredSession() error {
	return httpapi.Unauthorized(CodeSessionExpired, "the session expired or was replaced; register again")
}

// agentNode is the node id of an authenticated agent call.
func agentNode(r *http.Request) string {
	p := httpapi.Principal(r.Context())
	if len(p) > len(principalNode) && p[:len(principalNode)] == principalNode {
		return p[len(principalNode):]
	}
	return ""
}

func (h *Hub) postRegister(w http.ResponseWriter, r *http.Request) error {
	if err := h.admitAddress(r); err != nil {
		return err
	}
	var req wire.RegisterRequest
	if err := httpapi.DecodeJSON(r, &req, MaxBodyBytes); err != nil {
		return err
	}
	var probs []httpapi.FieldProblem
	if !wire.ValidID(req.NodeID) {
		probs = append(probs, httpapi.FieldProblem{Path: "node_id", Message: idMessage})
	}
	if req.BootID == "" || len(req.BootID) > maxIDLen {
		probs = append(probs, httpapi.FieldProblem{Path: "boot_id", Message: "1 to 255 characters"})
	}
	if req.ProtocolVersion != wire.ProtocolVersion {
		probs = append(probs, httpapi.FieldProblem{Path: "protocol_version", Message: fmt.Sprintf("this Hub speaks protocol %d", wire.ProtocolVersion)})
	}
	probs = append(probs, registerBounds(req.Version, req.DataAddress, req.Capabilities)...)
	if n := len(req.NodeCredential); n < minCredentialLen || n > maxCredentialLen {
		probs = append(probs, httpapi.FieldProblem{Path: "node_credential",
			Message: fmt.Sprintf("%d to %d characters: the node's own secret, generated once in its state directory", minCredentialLen, maxCredentialLen)})
	}
	probs = append(probs, checkDataFingerprint(req.DataFingerprint)...)
	lease := defaultLeaseTTL
	if req.LeaseTTLMS != 0 {
		lease = time.Duration(req.LeaseTTLMS) * time.Millisecond
	}
	sess := defaultSessionTTL
	if req.SessionTTLMS != 0 {
		sess = time.Duration(req.SessionTTLMS) * time.Millisecond
	}
	if lease < minLeaseTTL {
		probs = append(probs, httpapi.FieldProblem{Path: "lease_ttl_ms", Message: "at least 100"})
	}
	if sess < minSessionTTL {
		probs = append(probs, httpapi.FieldProblem{Path: "session_ttl_ms", Message: "at least 1000"})
	}
	if len(probs) > 0 {
		return httpapi.Validation(probs)
	}
	// A longer session than the Hub grants is clamped, not refused: the
	// answer says what was granted.
	sess = min(sess, h.opts.Settings.sessionTTLMax())
	if err := h.checkClientCert(r, req.NodeID); err != nil {
		if errors.Is(err, errNotNamed) {
			return h.identityRefused(r, req.NodeID, err.Error())
		}
		return err
	}
	token, err := newSessionToken()
	if err != nil {
		return err
	}
	now := h.opts.Now()
	caps := slices.Clone(req.Capabilities)
	slices.Sort(caps)
	caps = slices.Compact(caps)
	cred := credentialDigest(req.NodeCredential)
	h.admission.mu.Lock()
	defer h.admission.mu.Unlock()
	if err := h.admitNode(r, req.NodeID); err != nil {
		return err
	}
	reg := store.Registration{NodeID: req.NodeID, BootID: req.BootID, Version: req.Version, ProtocolVersion: req.ProtocolVersion,
		Capabilities: caps, DataAddress: req.DataAddress, DataFingerprint: req.DataFingerprint, SessionToken: token, SessionExpiresAt: now.Add(sess),
		LeaseExpiresAt: now.Add(lease), LeaseTTL: lease, CredentialDigest: cred, SessionBinding: h.sessionBinding(cred),
		Quiet: h.quietNode(req.NodeID, now), Now: now}
	switch err := h.st.RegisterNode(r.Context(), reg); {
	case errors.Is(err, store.ErrIdentityMismatch):
		return h.identityRefused(r, req.NodeID, "another node credential registered it first")
	case err != nil:
		return h.storeFailed(err)
	}
	h.nodeEventsWritten(req.NodeID, 1, reg.Quiet, now)
	// The replaced session stops working at once.
	came, rebooted := h.fleet.Register(reg)
	switch {
	case came:
		h.nodeOnline(req.NodeID, now)
	case rebooted:
		h.converge(req.NodeID)
	}
	return httpapi.WriteJSON(w, http.StatusOK, wire.RegisterResponse{SessionToken: token, SessionExpiresAt: wire.At(reg.SessionExpiresAt),
		SessionTTLMS: sess.Milliseconds(), LeaseTTLMS: lease.Milliseconds(), HeartbeatIntervalMS: (lease / 3).Milliseconds(),
		Epoch: h.lead.currentEpoch()})
}

// checkDataFingerprint checks an advertised data_fingerprint ("" is none:
// the node's split jobs then fail on its peers, which never link without
// TLS).
func checkDataFingerprint(fp string) []httpapi.FieldProblem {
	if fp == "" || wire.ValidDataFingerprint(fp) {
		return nil
	}
	return []httpapi.FieldProblem{{Path: "data_fingerprint", Message: `"sha256:" and 64 lowercase hex digits`}}
}

func newSessionToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("session token: %w", err)
	}
	return "fps_" + base64.RawURLEncoding.EncodeToString(b), nil
}

func (h *Hub) postHeartbeat(w http.ResponseWriter, r *http.Request) error {
	var req wire.HeartbeatRequest
	if err := httpapi.DecodeJSON(r, &req, MaxBodyBytes); err != nil {
		return err
	}
	if probs := append(registerBounds("", req.DataAddress, req.Capabilities), checkDataFingerprint(req.DataFingerprint)...); len(probs) > 0 {
		return httpapi.Validation(probs)
	}
	id := agentNode(r)
	now := h.opts.Now()
	caps := slices.Clone(req.Capabilities)
	slices.Sort(caps)
	caps = slices.Compact(caps)
	until, came, changed := h.fleet.Heartbeat(id, caps, req.DataAddress, req.DataFingerprint, now)
	// Leases live in memory; only a change of what the node advertises is
	// written, unless other Hubs share the database: then the leader learns
	// of the lease from the store, whichever Hub the Agent calls.
	if changed || h.st.Shared() {
		if err := h.st.Heartbeat(r.Context(), id, caps, req.DataAddress, req.DataFingerprint, until); err != nil {
			return h.storeFailed(err)
		}
		h.fleet.Advertise(id, caps, req.DataAddress, req.DataFingerprint)
		h.nudge()
	}
	if came {
		h.nodeOnline(id, now)
	}
	return httpapi.WriteJSON(w, http.StatusOK, wire.HeartbeatResponse{LeaseExpiresAt: wire.At(until), Epoch: h.lead.currentEpoch()})
}

func (h *Hub) postReport(w http.ResponseWriter, r *http.Request) error {
	var req wire.Report
	if err := httpapi.DecodeJSON(r, &req, MaxBodyBytes); err != nil {
		return err
	}
	if req.BootID == "" || req.ReportSeq < 1 {
		return httpapi.Validation([]httpapi.FieldProblem{{Path: "report_seq", Message: "boot_id and a positive report_seq are required"}})
	}
	if probs := reportProblems(req); len(probs) > 0 {
		return httpapi.Validation(probs)
	}
	id := agentNode(r)
	now := h.opts.Now()
	obs := make([]store.ObservedStream, 0, len(req.Streams))
	for _, s := range req.Streams {
		obs = append(obs, store.ObservedStream{StreamID: s.ID, State: s.State, Generation: s.Generation, ConfigVersion: s.ConfigVersion,
			ActionID: s.ActionID, LastError: truncate(s.LastError, maxErrorLen), LastErrorAt: s.LastErrorAt.Time})
	}
	slices.SortFunc(obs, func(a, b store.ObservedStream) int { return cmpString(a.StreamID, b.StreamID) })
	// The fleet keeps reports sorted by stream id, each id once (what the
	// store keeps): listings merge them in order.
	for i := 1; i < len(obs); i++ {
		if obs[i].StreamID == obs[i-1].StreamID {
			return httpapi.Validation([]httpapi.FieldProblem{{Path: "streams", Message: "stream " + strconv.Quote(obs[i].StreamID) + " is reported twice"}})
		}
	}
	counters := map[string]wire.StreamCounters{}
	for _, s := range req.Streams {
		if s.Counters != nil {
			counters[s.ID] = *s.Counters
		}
	}
	rep := fleet.Report{NodeID: id, BootID: req.BootID, Seq: req.ReportSeq, Streams: obs, Counters: counters,
		ConfigVersion: req.ConfigurationVersion, Configuration: req.Configuration, Metrics: req.Metrics, Now: now}
	got := h.fleet.Receive(rep)
	// A report that says nothing new still says the observation is current.
	if got.Refreshed {
		h.converge(id)
	}
	if got.Stale || got.Same {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	quiet := h.quietNode(id, now)
	res, err := h.st.ApplyReport(r.Context(), store.Report{NodeID: id, BootID: req.BootID, Seq: req.ReportSeq, Streams: obs,
		ConfigVersion: req.ConfigurationVersion, Configuration: req.Configuration, Metrics: req.Metrics, Quiet: quiet, Now: now})
	if err != nil {
		return h.storeFailed(err)
	}
	if res.NewBoot {
		h.nodeEventsWritten(id, 1, quiet, now)
	}
	if !res.Stale {
		h.fleet.Accept(rep, res.NewBoot)
		h.streamChanges(id, got.Prev, obs, now)
		if res.NewBoot {
			h.reassertConfig(r.Context(), id, now)
		}
		switch changed := changedStreams(got.Prev, obs); {
		case got.PrevConfigVersion != req.ConfigurationVersion || !got.SameConfig || res.NewBoot || !got.WasFresh:
			h.converge(id)
		case len(changed) > 0:
			h.converge(id, changed...)
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// postJobObservations stores a node's job observations, ordered like
// reports by (boot_id, report_seq): an older body is ignored (204 all the
// same). The completed artifacts they carry are recorded.
func (h *Hub) postJobObservations(w http.ResponseWriter, r *http.Request) error {
	var req wire.JobObservations
	if err := httpapi.DecodeJSON(r, &req, MaxBodyBytes); err != nil {
		return err
	}
	if req.BootID == "" || req.ReportSeq < 1 {
		return httpapi.Validation([]httpapi.FieldProblem{{Path: "report_seq", Message: "boot_id and a positive report_seq are required"}})
	}
	if probs := fieldProblem("boot_id", req.BootID, maxFieldLen); len(probs) > 0 {
		return httpapi.Validation(probs)
	}
	if len(req.Jobs) > wire.MaxObservedJobs {
		return httpapi.Validation([]httpapi.FieldProblem{{Path: "jobs", Message: fmt.Sprintf("at most %d jobs", wire.MaxObservedJobs)}})
	}
	id := agentNode(r)
	now := h.opts.Now()
	rep := store.JobReport{NodeID: id, BootID: req.BootID, Seq: req.ReportSeq, Quiet: h.quietNode(id, now), Now: now,
		Jobs: make([]store.ObservedJob, 0, len(req.Jobs))}
	for i, o := range req.Jobs {
		path := "jobs[" + strconv.Itoa(i) + "]"
		if !wire.ValidID(o.ID) {
			return httpapi.Validation([]httpapi.FieldProblem{{Path: path + ".id", Message: idMessage}})
		}
		if len(o.Artifacts) > 16 || len(o.Tasks) > 4096 {
			return httpapi.Validation([]httpapi.FieldProblem{{Path: path, Message: "at most 16 artifacts and 4096 tasks"}})
		}
		if probs := jobObservationProblems(path, o); len(probs) > 0 {
			return httpapi.Validation(probs)
		}
		for _, a := range o.Artifacts {
			if a.ID < 1 || (a.Kind != wire.ArtifactCheckpoint && a.Kind != wire.ArtifactSavepoint) {
				return httpapi.Validation([]httpapi.FieldProblem{{Path: path + ".artifacts", Message: "kind checkpoint or savepoint and a positive id"}})
			}
			a.JobID, a.NodeID, a.State = o.ID, id, wire.ArtifactCompleted
			// OperationID, when the node says a command took it, ties it
			// to that command's pending record.
			a.Location, a.OperationID = truncate(a.Location, maxErrorLen), truncate(a.OperationID, maxIDLen)
			if a.StatefulOperators == nil {
				a.StatefulOperators = []string{}
			}
			rep.Artifacts = append(rep.Artifacts, a)
		}
		o.LastError = truncate(o.LastError, maxErrorLen)
		detail := o
		detail.Artifacts = nil
		b, err := json.Marshal(detail)
		if err != nil {
			return err
		}
		rep.Jobs = append(rep.Jobs, store.ObservedJob{NodeID: id, JobID: o.ID, State: o.State, Generation: o.Generation, Version: o.Version,
			ActionID: o.ActionID, LastError: o.LastError, LastErrorAt: o.LastErrorAt.Time, Detail: b, UpdatedAt: now})
	}
	res, err := h.st.ApplyJobReport(r.Context(), rep)
	if err != nil {
		return h.storeFailed(err)
	}
	h.nodeEventsWritten(id, len(res.Changed), rep.Quiet, now)
	if !res.Stale && len(res.Changed) > 0 {
		h.converge(id, res.Changed...)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// jobCommandDone records what a finished job command leaves: the artifact
// of a checkpoint, a savepoint or a stop with savepoint, or the failure of
// a command whose artifact record waits. in is the command's intent after
// the attempt finished.
func (h *Hub) jobCommandDone(ctx context.Context, in store.Intent, state string, result json.RawMessage, failure *wire.Failure, now time.Time) {
	if !jobKind(in.Kind) {
		return
	}
	var err error
	switch {
	case state == wire.ResultSucceeded && len(result) > 0 && (in.Operation == wire.CommandJobCheckpoint || in.Operation == wire.CommandJobSavepoint):
		var a wire.JobArtifact
		if json.Unmarshal(result, &a) != nil || a.ID < 1 {
			err = h.st.FinishJobCommand(ctx, in.ID, nil, &wire.Failure{Class: "permanent", Code: "invalid_result", Message: "the node's result names no artifact"}, now)
			break
		}
		a.JobID, a.NodeID, a.OperationID, a.State, a.Trigger = in.ResourceID, in.NodeID, in.ID, wire.ArtifactCompleted, wire.TriggerOperator
		err = h.st.FinishJobCommand(ctx, in.ID, &a, nil, now)
	case state == wire.ResultSucceeded && len(result) > 0 && in.Operation == wire.CommandJobStop:
		var a wire.JobArtifact
		if json.Unmarshal(result, &a) == nil && a.ID > 0 {
			a.JobID, a.NodeID, a.OperationID, a.State, a.Trigger = in.ResourceID, in.NodeID, in.ID, wire.ArtifactCompleted, wire.TriggerStop
			if a.StatefulOperators == nil {
				a.StatefulOperators = []string{}
			}
			err = h.st.RecordArtifacts(ctx, []store.Artifact{a}, now)
		}
	case in.State == wire.OpFailed && in.Kind == store.KindJobCommand:
		if failure == nil {
			failure = in.Failure
		}
		err = h.st.FinishJobCommand(ctx, in.ID, nil, failure, now)
	}
	if err != nil {
		h.storeFailed(err)
	}
}

// changedStreams returns the ids of the streams whose observation differs
// between two reports (new, changed or gone).
func changedStreams(prev, cur []store.ObservedStream) []string {
	was := make(map[string]store.ObservedStream, len(prev))
	for _, o := range prev {
		was[o.StreamID] = o
	}
	var out []string
	for _, o := range cur {
		if p, ok := was[o.StreamID]; !ok || !fleet.SameObservation([]store.ObservedStream{p}, []store.ObservedStream{o}) {
			out = append(out, o.StreamID)
		}
		delete(was, o.StreamID)
	}
	for id := range was {
		out = append(out, id)
	}
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// waitMS is an Agent long-poll's wait_ms query (0 when absent).
func waitMS(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait_ms")
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.Atoi(v)
	if err != nil || ms < 0 || ms > wire.MaxWaitMS {
		return 0, httpapi.BadRequest(httpapi.CodeInvalidQuery, fmt.Sprintf("wait_ms must be an integer from 0 to %d", wire.MaxWaitMS))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func (h *Hub) getCommands(w http.ResponseWriter, r *http.Request) error {
	wait, err := waitMS(r)
	if err != nil {
		return err
	}
	cmds, parked := h.fleet.Poll(r.Context(), w, r, agentNode(r), wait)
	if parked {
		return nil // answered when a command comes or the wait ends
	}
	return httpapi.WriteJSON(w, http.StatusOK, fleet.CommandPage(cmds))
}

func (h *Hub) postCommandResult(w http.ResponseWriter, r *http.Request) error {
	var req wire.CommandResult
	if err := httpapi.DecodeJSON(r, &req, MaxBodyBytes); err != nil {
		return err
	}
	states := []string{wire.ResultAcknowledged, wire.ResultSucceeded, wire.ResultFailed, wire.ResultTimedOut}
	if !slices.Contains(states, req.State) {
		return httpapi.Validation([]httpapi.FieldProblem{{Path: "state", Message: "one of acknowledged, succeeded, failed, timed_out"}})
	}
	if req.Failure != nil {
		req.Failure.Message = truncate(req.Failure.Message, maxErrorLen)
	}
	if req.State == wire.ResultFailed && req.Failure != nil && req.Failure.Code == wire.FailureStaleEpoch {
		// The Agent refused a deposed leader's command without running it:
		// the attempt is retried, as a timed-out one is, by the leader.
		req.State = wire.ResultTimedOut
	}
	ctx := r.Context()
	id := agentNode(r)
	a, err := h.st.GetAttempt(ctx, req.AttemptID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (a.NodeID != id || a.IntentID != r.PathValue("id"))) {
		return httpapi.NotFound(CodeOperationNotFound, "no such command attempt for this node")
	}
	if err != nil {
		return problemFor(err, anyResource)
	}
	now := h.opts.Now()
	err = h.st.FinishAttempt(ctx, store.AttemptFinish{AttemptID: req.AttemptID, State: req.State, Failure: req.Failure, Result: req.Result, Now: now})
	switch {
	case errors.Is(err, store.ErrAttemptFinished):
		return httpapi.Conflict(httpapi.CodeConflict, "that attempt already finished")
	case errors.Is(err, store.ErrInvalid):
		return httpapi.Validation([]httpapi.FieldProblem{{Path: "result", Message: "must be JSON"}})
	case err != nil:
		return h.storeFailed(err)
	}
	if in, ierr := h.st.GetIntent(ctx, a.IntentID); ierr == nil {
		h.jobCommandDone(ctx, in, req.State, req.Result, req.Failure, now)
		h.configApplied(ctx, in, req.State, req.Result, now)
	}
	if res := h.attemptMoved(req.AttemptID, req.State, now); res != "" {
		h.converge(id, res)
	} else {
		h.converge(id)
	}
	if req.State == wire.ResultTimedOut {
		h.fleet.Mark(id)
		h.nudge()
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
