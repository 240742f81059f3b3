package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/policy"
	"github.com/flowplane/flowplane/internal/wire"
)

// Failure codes of configuration commands.
const (
	codeValidationFailed = "validation_failed"
	codeInternal         = "internal"
)

func isConfigCommand(op string) bool {
	switch op {
	case wire.CommandConfigValidate, wire.CommandConfigDiff, wire.CommandConfigApply:
		return true
	}
	return false
}

// configuration is the configuration reports show: the node's applied
// version, and the Hub version and generation of the last
// configuration_apply while the node still runs the version it made (a
// local apply or a changed --config file at boot makes them differ: the
// Hub then sees drift). While an apply runs, reports keep showing what
// they showed before it, until its outcome is posted.
func (x *executor) configuration() *wire.ReportConfiguration {
	x.mu.Lock()
	held := x.heldConfig
	x.mu.Unlock()
	if held != nil {
		c := *held
		return &c
	}
	return x.currentConfiguration()
}

func (x *executor) currentConfiguration() *wire.ReportConfiguration {
	c := &wire.ReportConfiguration{NodeVersion: x.node.ConfigVersion()}
	if rec, ok := x.st.configuration(); ok && rec.NodeVersion == c.NodeVersion {
		c.HubVersion, c.Generation = rec.HubVersion, rec.Generation
	}
	return c
}

// queueConfig runs a configuration command after the configuration
// commands delivered before it, in the background.
func (x *executor) queueConfig(ctx context.Context, cmd wire.Command, acked <-chan struct{}) {
	x.mu.Lock()
	prev := x.configTail
	done := make(chan struct{})
	x.configTail = done
	x.mu.Unlock()
	x.background(func() {
		defer close(done)
		if prev != nil {
			select {
			case <-prev:
			case <-ctx.Done():
				return // not recorded: a redelivery runs it
			}
		}
		apply := cmd.Operation == wire.CommandConfigApply
		if apply {
			held := x.currentConfiguration()
			x.mu.Lock()
			x.heldConfig = held
			x.mu.Unlock()
		}
		out, rec, ok := x.runConfig(ctx, cmd)
		if !ok {
			x.release(apply)
			return // shutting down: not recorded, a redelivery runs it again
		}
		x.mu.Lock()
		// Validations and diffs change nothing and their results may be
		// large (a diff of two 4 MiB texts): a redelivery runs them again
		// rather than the state file keeping them.
		if apply {
			if err := x.st.recordConfig(out, rec); err != nil {
				x.log.Error("agent state not written; a redelivered configuration command may run again", "err", err)
			}
		}
		atts := x.inflight[cmd.CommandID]
		delete(x.inflight, cmd.CommandID)
		x.mu.Unlock()
		<-acked // the outcome follows the acknowledgement
		x.answer(ctx, cmd, out, atts, "configuration ", "resource_id")
		x.release(apply)
	})
}

// release lets reports show the configuration as it is (after an apply's
// outcome was posted) and asks for one at once.
func (x *executor) release(apply bool) {
	if !apply {
		return
	}
	x.mu.Lock()
	x.heldConfig = nil
	x.mu.Unlock()
	if x.wake != nil {
		x.wake()
	}
}

// runConfig carries out one configuration command. It returns the outcome
// and, for an apply that succeeded, the record to keep; ok is false when
// ctx ended first (nothing is recorded then).
func (x *executor) runConfig(ctx context.Context, cmd wire.Command) (out Outcome, rec *ConfigRecord, ok bool) {
	out = Outcome{CommandID: cmd.CommandID, State: wire.ResultSucceeded}
	fail := func(class, code, format string, args ...any) (Outcome, *ConfigRecord, bool) {
		out.State = wire.ResultFailed
		out.Failure = &wire.Failure{Class: class, Code: code, Message: fmt.Sprintf(format, args...)}
		return out, nil, true
	}
	result := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic("agent: encode a configuration result: " + err.Error()) // plain structs
		}
		out.Result = b
	}
	p := cmd.Payload.ConfigCommand
	req := node.Request{Actor: actor, CorrelationID: cmd.CommandID}
	switch cmd.Operation {
	case wire.CommandConfigValidate:
		doc, err := document(p)
		if err != nil {
			return fail(classPermanent, codeInvalidPayload, "%v", err)
		}
		// An invalid configuration is a successful validation: the report
		// says valid false. One the node's policy refuses fails, its
		// report listing the refusals.
		rep, err := x.node.ValidateHub(doc, p.Secrets)
		if errors.Is(err, policy.ErrDenied) {
			out, _, _ = fail(classPermanent, policy.Code, "%v", err)
		}
		result(rep)
		return out, nil, true
	case wire.CommandConfigDiff:
		if p.From == nil || p.To == nil {
			return fail(classPermanent, codeInvalidPayload, "configuration_diff needs payload from and to")
		}
		d, err := x.node.DiffTexts(*p.From, *p.To)
		if err != nil {
			return fail(classPermanent, codeInvalidPayload, "%v", err)
		}
		result(d)
		return out, nil, true
	}

	// configuration_apply.
	if p.Content == "" && p.NodeVersion == "" {
		return fail(classPermanent, codeInvalidPayload, "configuration_apply needs payload content or node_version")
	}
	hubVersion := cmd.ConfigVersion
	if p.NodeVersion != "" && p.Content == "" {
		hubVersion = ""
	} else if hubVersion == "" {
		return fail(classPermanent, codeInvalidPayload, "configuration_apply of content needs the command's config_version")
	}
	if prev, done := x.alreadyApplied(cmd, hubVersion); done {
		out.Result = prev
		return out, nil, true
	}
	var res wire.ConfigApplyResult
	var err error
	if hubVersion == "" {
		res, err = x.node.ReapplyVersion(ctx, p.NodeVersion, req)
	} else {
		doc, derr := document(p)
		if derr != nil {
			return fail(classPermanent, codeInvalidPayload, "%v", derr)
		}
		res, err = x.node.ApplyHub(ctx, doc, p.Secrets, hubVersion, req)
	}
	var ve *node.ValidationError
	var ae *node.ApplyError
	var pe *policy.Error
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return out, nil, false
	case errors.As(err, &pe):
		out, _, _ = fail(classPermanent, policy.Code, "%v", pe)
		result(node.Report{Errors: pe.Problems()})
		return out, nil, true
	case errors.As(err, &ve):
		// The report goes back so that the operator sees every problem.
		out, _, _ = fail(classPermanent, codeValidationFailed, "%s", ve.Error())
		result(ve.Report)
		return out, nil, true
	case errors.Is(err, node.ErrVersionNotFound):
		return fail(classPermanent, codeConfigVersion, "this node has no configuration version %s", p.NodeVersion)
	case errors.As(err, &ae):
		f := ae.Failure
		out.State, out.Failure = wire.ResultFailed, &f
		return out, nil, true
	default:
		// Node errors are redacted of secret values.
		return fail(codeInternal, codeInternal, "%v", err)
	}
	result(res)
	return out, &ConfigRecord{HubVersion: hubVersion, Generation: cmd.Generation, NodeVersion: res.NodeVersion, CommandID: cmd.CommandID}, true
}

// alreadyApplied answers a configuration_apply whose generation is the
// one recorded while the node still runs the node version it made (the
// same apply delivered again under another command id): it returns the
// result to answer with, and true, without applying anything.
func (x *executor) alreadyApplied(cmd wire.Command, hubVersion string) (json.RawMessage, bool) {
	rec, ok := x.st.configuration()
	if !ok || cmd.Generation <= 0 || rec.Generation != cmd.Generation || rec.HubVersion != hubVersion || rec.NodeVersion != x.node.ConfigVersion() {
		return nil, false
	}
	x.log.Info("configuration already applied at this generation; answering its recorded result", "command_id", cmd.CommandID, "generation", cmd.Generation, "node_version", rec.NodeVersion, "hub_version", rec.HubVersion)
	if o, ok := x.st.outcome(rec.CommandID); ok && o.State == wire.ResultSucceeded && len(o.Result) > 0 {
		return o.Result, true
	}
	// The outcome left the cache: what the record says, nothing changed.
	res := wire.ConfigApplyResult{ConfigVersion: rec.HubVersion, NodeVersion: rec.NodeVersion, Added: []string{}, Removed: []string{}, Changed: []string{}, Unchanged: []string{}}
	for _, s := range x.node.Streams() {
		res.Unchanged = append(res.Unchanged, s.ID)
	}
	b, _ := json.Marshal(res)
	return b, true
}

// document is the payload's configuration text.
func document(p wire.ConfigCommand) (node.Document, error) {
	f, err := config.ParseFormat(p.Format)
	if err != nil {
		return node.Document{}, fmt.Errorf("payload format: %w", err)
	}
	if p.Content == "" {
		return node.Document{}, errors.New("payload content is empty")
	}
	return node.Document{Format: f, Content: []byte(p.Content)}, nil
}
