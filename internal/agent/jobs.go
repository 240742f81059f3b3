package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/policy"
	"github.com/flowplane/flowplane/internal/wire"
)

// Failure codes of job commands.
const (
	codeInvalidSpec     = "invalid_spec"
	codeJobNotFound     = "job_not_found"
	codeJobNotRunning   = "job_not_running"
	codeJobConfigured   = "job_id_in_use"
	codeFenced          = "fenced"
	codeJobFailed       = "job_failed"
	codeNoCheckpointing = "no_checkpointing"
	codeArtifactFailed  = "artifact_failed"
)

// Hub job desired states.
const (
	jobDesiredRunning = "running"
	jobDesiredStopped = "stopped"
)

// specPath is the path prefix of a Hub job's problems: the spec the
// operator submitted, not the document the node materializes it in.
const specPath = "spec"

// startWait bounds how long job_start waits for the job to leave starting:
// a job that fails at once (fenced, an artifact that cannot be restored)
// fails the command; one still starting then succeeds, and observations
// follow it.
const startWait = 2 * time.Minute

func isJobCommand(op string) bool {
	switch op {
	case wire.CommandJobStart, wire.CommandJobStop, wire.CommandJobCheckpoint, wire.CommandJobSavepoint, wire.CommandJobValidate:
		return true
	}
	return false
}

// materializeJob turns a Hub job spec into a configured job exactly as
// the node materializes its configuration: a document holding that one
// job, through config.Materialize with the node's registry and secret
// resolver, then the deep build. Problems are named under "spec" and
// never hold a resolved secret value. The node's remote policy sees the
// spec first (its references, before any resolves) and the materialized
// job next (its files and destinations); code is policy.Code when it
// refused the spec, else codeInvalidSpec.
func (x *executor) materializeJob(spec json.RawMessage) (cfg *config.Config, probs []config.Problem, code string) {
	if len(spec) == 0 {
		return nil, []config.Problem{{Path: specPath, Message: "the command carries no job spec"}}, codeInvalidSpec
	}
	doc, err := json.Marshal(map[string]any{"streams": []any{}, "jobs": []json.RawMessage{spec}})
	if err != nil {
		return nil, []config.Problem{{Path: specPath, Message: "the spec is not a JSON object"}}, codeInvalidSpec
	}
	if ps := x.policyDocument(doc); len(ps) > 0 {
		return nil, ps, policy.Code
	}
	cfg, err = config.Materialize(doc, config.JSON, x.jobs.reg, x.jobs.resolver)
	if ps := config.Problems(err); len(ps) > 0 {
		return cfg, specProblems(ps), codeInvalidSpec
	}
	if x.jobs.secrets != nil {
		x.jobs.secrets.Merge(cfg.Redactor())
	}
	// The policy's word on the files and destinations before the deep
	// build, which then builds the components in the remote sandbox.
	if ps := x.policyConfig(cfg); len(ps) > 0 {
		return cfg, ps, policy.Code
	}
	if ps := cfg.Redact(engine.CheckIn(cfg, x.jobs.reg, x.sandbox())); len(ps) > 0 {
		return cfg, specProblems(ps), codeInvalidSpec
	}
	return cfg, nil, ""
}

// policyDocument is the remote policy's refusals of a job document's
// text (named under spec), before any reference resolves. The Hub
// substituted the ${secret:} values it holds: a reference left is the
// node's to resolve.
func (x *executor) policyDocument(doc []byte) []config.Problem {
	if x.policy == nil {
		return nil
	}
	tree, err := config.Tree(doc, config.JSON)
	if err != nil {
		return nil // materializing reports it
	}
	return policyProblems(x.policy.Document(tree, nil), x.jobs.redact)
}

// policyConfig is the remote policy's refusals of a materialized job's
// files and destinations, named under spec and redacted.
func (x *executor) policyConfig(cfg *config.Config) []config.Problem {
	if x.policy == nil {
		return nil
	}
	return policyProblems(x.policy.Config(context.Background(), cfg), x.jobs.redact)
}

func policyProblems(ds []policy.Denial, redact func(string) string) []config.Problem {
	if len(ds) == 0 {
		return nil
	}
	ps := make([]config.Problem, len(ds))
	for i, d := range ds {
		p := d.Problem()
		p.Message = redact(p.Message)
		ps[i] = p
	}
	return specProblems(ps)
}

// specProblems renames the document's jobs[0] to spec.
func specProblems(ps []config.Problem) []config.Problem {
	out := make([]config.Problem, len(ps))
	for i, p := range ps {
		switch {
		case p.Path == "jobs[0]":
			p.Path = specPath
		case strings.HasPrefix(p.Path, "jobs[0]."):
			p.Path = specPath + strings.TrimPrefix(p.Path, "jobs[0]")
		case p.Path == "" || p.Path == "jobs":
			p.Path = specPath
		}
		out[i] = p
	}
	return out
}

func problemsMessage(ps []config.Problem) string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "; ")
}

func permanentFailure(code, format string, args ...any) *wire.Failure {
	return &wire.Failure{Class: classPermanent, Code: code, Message: fmt.Sprintf(format, args...)}
}

// jobResult is what running one job command produced: its outcome and,
// when it changed the job's desire, the new desire. done false means the
// Agent is shutting down: nothing is recorded, a redelivery runs it again.
type jobResult struct {
	out    Outcome
	desire *JobDesire
	done   bool
}

// queueJob runs a job command after every earlier command for the same
// job, in the background: commands for one job run in delivery order.
func (x *executor) queueJob(ctx context.Context, cmd wire.Command, acked <-chan struct{}) {
	id := cmd.ResourceID
	x.mu.Lock()
	prev := x.jobTail[id]
	done := make(chan struct{})
	x.jobTail[id] = done
	x.mu.Unlock()
	x.background(func() {
		defer func() {
			x.mu.Lock()
			if x.jobTail[id] == done {
				delete(x.jobTail, id)
			}
			x.mu.Unlock()
			close(done)
		}()
		if prev != nil {
			select {
			case <-prev:
			case <-ctx.Done():
				return
			}
		}
		var release func()
		if takesArtifact(cmd) {
			release = x.take(id)
		}
		r := x.execJob(ctx, cmd)
		if !r.done {
			x.mu.Lock()
			delete(x.inflight, cmd.CommandID)
			if release != nil {
				release()
			}
			x.mu.Unlock()
			return
		}
		x.jobLedger.finish(ctx, x, cmd, r.out, r.desire, acked, release)
	})
}

// takesArtifact reports whether a job command may take an artifact: a
// checkpoint, a savepoint, or a stop with a savepoint.
func takesArtifact(cmd wire.Command) bool {
	switch cmd.Operation {
	case wire.CommandJobCheckpoint, wire.CommandJobSavepoint:
		return true
	case wire.CommandJobStop:
		return cmd.Payload.Savepoint
	}
	return false
}

// execJob carries out one job command.
func (x *executor) execJob(ctx context.Context, cmd wire.Command) jobResult {
	fail := func(f *wire.Failure) jobResult {
		return jobResult{out: Outcome{CommandID: cmd.CommandID, State: wire.ResultFailed, Failure: f}, done: true}
	}
	succeed := func(result any, d *JobDesire) jobResult {
		out := Outcome{CommandID: cmd.CommandID, State: wire.ResultSucceeded}
		if result != nil {
			b, err := json.Marshal(result)
			if err != nil {
				return fail(&wire.Failure{Class: "internal", Code: "internal", Message: "the result could not be encoded"})
			}
			out.Result = b
		}
		return jobResult{out: out, desire: d, done: true}
	}
	if x.jobs == nil {
		return fail(permanentFailure(codeUnsupported, "this Agent does not execute %q commands: it has no job engine", cmd.Operation))
	}
	eng := x.jobs.eng
	id := cmd.ResourceID
	switch cmd.Operation {
	case wire.CommandJobValidate:
		v := x.validateJob(ctx, cmd.Payload.Spec)
		r := succeed(v, nil)
		for _, c := range v.Checks {
			if c.Check == checkPolicy && c.Status == checkFailed {
				// A refusal fails the command; the result still lists
				// every refusal.
				r.out.State = wire.ResultFailed
				r.out.Failure = permanentFailure(policy.Code, "%s", c.Path+": "+c.Message)
				break
			}
		}
		return r

	case wire.CommandJobStart:
		p := cmd.Payload.JobCommand
		cfg, probs, code := x.materializeJob(p.Spec)
		if len(probs) > 0 {
			return fail(permanentFailure(code, "%s", problemsMessage(probs)))
		}
		spec := cfg.Jobs[0]
		if spec.ID != id {
			return fail(permanentFailure(codeInvalidPayload, "the spec's id %q is not the command's job %q", spec.ID, id))
		}
		h := engine.HubJob{Spec: spec, Path: specPath, Generation: cmd.Generation}
		switch p.Recovery {
		case "", engine.RecoverLatestCheckpoint, engine.RecoverLatestSavepoint, engine.RecoverFail, engine.RecoverNone, engine.RecoverNewest:
			h.Recovery = p.Recovery
		case wire.RecoveryArtifact:
			if p.Restore == nil || p.Restore.ID <= 0 || (p.Restore.Kind != wire.ArtifactCheckpoint && p.Restore.Kind != wire.ArtifactSavepoint) {
				return fail(permanentFailure(codeInvalidPayload, "recovery artifact needs restore {kind: checkpoint or savepoint, id}"))
			}
			h.Recovery, h.Restore = engine.RecoverArtifact, &engine.ArtifactRef{Kind: p.Restore.Kind, ID: p.Restore.ID}
		default:
			return fail(permanentFailure(codeInvalidPayload, "recovery %q is not latest_checkpoint, latest_savepoint, fail, none or artifact", p.Recovery))
		}
		d := JobDesire{State: jobDesiredRunning, Generation: cmd.Generation, Version: p.JobVersion, ActionID: cmd.ActionID, Spec: p.Spec, CommandID: cmd.CommandID}.withSplit(p)
		x.jobs.redactSecret(d.DataSecret)
		if err := d.applySplit(&h); err != nil {
			return fail(permanentFailure(codeInvalidPayload, "job %q: %v", id, err))
		}
		err := eng.StartHubJob(ctx, h)
		var be *engine.BuildError
		switch {
		case ctx.Err() != nil:
			return jobResult{}
		case errors.Is(err, engine.ErrJobConfigured):
			return fail(permanentFailure(codeJobConfigured, "job %q is configured on this node; the Hub cannot run a job of that id here", id))
		case x.jobs.splitFailure(err, h) != nil:
			return fail(x.jobs.splitFailure(err, h))
		case errors.As(err, &be):
			return fail(permanentFailure(codeInvalidSpec, "%s", problemsMessage(specProblems(cfg.Redact(be.Problems)))))
		case err != nil:
			return fail(permanentFailure(codeInvalidSpec, "%s", problemsMessage(specProblems(cfg.Redact(config.Problems(err))))))
		}
		st, ok := x.waitStarted(ctx, id)
		switch {
		case !ok:
			return jobResult{}
		case st.State == engine.JobFailed || st.Fenced:
			// The job is on the node and reported failed, or a newer
			// placement fenced it (it reads stopped); the Hub's desire was
			// applied all the same.
			code := codeJobFailed
			if st.Fenced {
				code = codeFenced
			}
			return jobResult{out: Outcome{CommandID: cmd.CommandID, State: wire.ResultFailed, Failure: permanentFailure(code, "%s", st.Error)}, desire: &d, done: true}
		}
		return succeed(nil, &d)

	case wire.CommandJobStop:
		d := &JobDesire{State: jobDesiredStopped, Generation: cmd.Generation, Version: cmd.Payload.JobVersion, ActionID: cmd.ActionID, CommandID: cmd.CommandID}
		if old, ok := x.st.jobs.get(id); ok {
			d.Spec = old.Spec
			if d.Version == 0 {
				d.Version = old.Version
			}
		}
		st, err := eng.Job(id)
		if err != nil || !st.Hub {
			// Not a job this node runs for the Hub: the fence stop the Hub
			// sends to a node a job moved away from. Nothing runs; the
			// desire is recorded so that a restart starts nothing.
			return succeed(nil, d)
		}
		m, err := eng.StopJob(ctx, id, cmd.Payload.Savepoint)
		switch {
		case ctx.Err() != nil:
			return jobResult{}
		case errors.Is(err, engine.ErrJobNotRunning):
			return fail(permanentFailure(codeJobNotRunning, "job %q is not running: no savepoint can be taken; stop it without one", id))
		case err != nil:
			return fail(x.artifactFailure(err, id))
		}
		if m == nil {
			return succeed(nil, d)
		}
		x.noteTrigger(id, m.ID, wire.TriggerStop, cmd.CommandID)
		return succeed(x.artifactOf(st.ObjectStoreURI, m, wire.TriggerStop), d)

	case wire.CommandJobCheckpoint, wire.CommandJobSavepoint:
		st, err := eng.Job(id)
		if err != nil || !st.Hub {
			return fail(permanentFailure(codeJobNotFound, "no Hub job %q on this node", id))
		}
		var m *engine.Manifest
		if cmd.Operation == wire.CommandJobCheckpoint {
			m, err = eng.CheckpointJob(ctx, id)
		} else {
			m, err = eng.SavepointJob(ctx, id)
		}
		if ctx.Err() != nil {
			return jobResult{}
		}
		if err != nil {
			return fail(x.artifactFailure(err, id))
		}
		x.noteTrigger(id, m.ID, wire.TriggerOperator, cmd.CommandID)
		return succeed(x.artifactOf(st.ObjectStoreURI, m, wire.TriggerOperator), nil)
	}
	return fail(permanentFailure(codeUnsupported, "this Agent does not execute %q commands", cmd.Operation))
}

// artifactFailure classifies a failed checkpoint, savepoint or stop.
func (x *executor) artifactFailure(err error, id string) *wire.Failure {
	switch {
	case errors.Is(err, engine.ErrJobNotFound):
		return permanentFailure(codeJobNotFound, "no Hub job %q on this node", id)
	case errors.Is(err, engine.ErrJobNotRunning), errors.Is(err, engine.ErrJobEnded):
		return permanentFailure(codeJobNotRunning, "job %q is not running", id)
	case errors.Is(err, engine.ErrNoCheckpointing):
		return permanentFailure(codeNoCheckpointing, "job %q has no checkpoint configuration", id)
	case errors.Is(err, engine.ErrFenced):
		return permanentFailure(codeFenced, "%s", err.Error())
	}
	return &wire.Failure{Class: "transient", Code: codeArtifactFailed, Message: x.jobs.redact(err.Error())}
}

// waitStarted waits until the job leaves starting (bounded by startWait);
// ok is false when ctx ended.
func (x *executor) waitStarted(ctx context.Context, id string) (engine.JobStatus, bool) {
	// Watching before the first look: no change between them is missed.
	changes, stop := x.jobs.eng.JobChanges()
	defer stop()
	t := time.NewTimer(startWait)
	defer t.Stop()
	for {
		st, err := x.jobs.eng.Job(id)
		if err != nil || st.State != engine.JobStarting {
			return st, true
		}
		select {
		case <-ctx.Done():
			return st, false
		case <-t.C:
			return st, true
		case <-changes:
		}
	}
}

// jobView is what job observations are built from, read at one instant:
// a command's new desire and the artifact it took become visible together.
type jobView struct {
	desires map[string]JobDesire // every Hub job's desire as observations show it
	taking  map[string]bool      // jobs whose new artifacts wait for a command's outcome
	takes   uint64               // the executor's takes then
}

// jobsShown returns the jobView of now.
func (x *executor) jobsShown() jobView {
	x.mu.Lock()
	defer x.mu.Unlock()
	v := jobView{desires: x.jobLedger.shownLocked(), taking: make(map[string]bool, len(x.taking)), takes: x.takes}
	for id := range x.taking {
		v.taking[id] = true
	}
	return v
}

// tookSince reports whether an artifact command started after the view
// was read: artifacts listed meanwhile may hold its artifact, which waits
// for its outcome.
func (x *executor) tookSince(v jobView) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.takes != v.takes
}

// taken is what took an artifact: its trigger and the command.
type taken struct {
	trigger, commandID string
}

// take counts an artifact command on a job until release is called, with
// mu held, as its outcome becomes visible: observations hold back the
// job's new artifacts meanwhile, so that the one the command takes is
// observed with its command id and in the same observation as the desire
// the command recorded (a stop's new generation), never first as a
// periodic one or at the generation before.
func (x *executor) take(jobID string) (release func()) {
	x.mu.Lock()
	x.taking[jobID]++
	x.takes++
	x.mu.Unlock()
	return func() {
		if x.taking[jobID]--; x.taking[jobID] <= 0 {
			delete(x.taking, jobID)
		}
	}
}

// noteTrigger remembers what took an artifact, for its observation.
func (x *executor) noteTrigger(jobID string, id int64, trigger, commandID string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.triggers[jobID+"/"+fmt.Sprint(id)] = taken{trigger: trigger, commandID: commandID}
}

// takenBy returns what took an artifact: the command's trigger and id, or
// for one no command took, periodic (checkpoints) or operator.
func (x *executor) takenBy(jobID string, id int64, kind string) taken {
	x.mu.Lock()
	defer x.mu.Unlock()
	if t, ok := x.triggers[jobID+"/"+fmt.Sprint(id)]; ok {
		return t
	}
	if kind == engine.ArtifactCheckpoint {
		return taken{trigger: wire.TriggerPeriodic}
	}
	return taken{trigger: wire.TriggerOperator}
}

// artifactOf is the Hub's record of a completed artifact.
func (x *executor) artifactOf(storeURI string, m *engine.Manifest, trigger string) wire.JobArtifact {
	return wire.JobArtifact{
		JobID: m.JobID, Kind: m.Kind, ID: m.ID, JobVersion: m.JobVersion, FormatVersion: m.FormatVersion,
		MaxParallelism: m.MaxParallelism, StatefulOperators: engine.StatefulOperators(m),
		Location: engine.ArtifactLocation(storeURI, m),
		Bytes:    m.Bytes, State: wire.ArtifactCompleted, Trigger: trigger, NodeID: x.nodeID,
		CreatedAt: wire.At(m.CreatedAt), CompletedAt: wire.At(m.CreatedAt),
	}
}

// sandbox is what a Hub job's components are built in when it is checked:
// the node's remote policy at use (none without a policy).
func (x *executor) sandbox() engine.Sandbox {
	if x.policy == nil {
		return engine.Sandbox{}
	}
	return engine.Sandbox{FS: x.policy.FS(), Net: x.policy.Net()}
}
