package main

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/flowplane/flowplane/internal/wire"
)

// simConfig is a simulated agent's configuration state (guarded by the
// agent's mu): the node's own version counter, and the Hub version and
// generation of the last configuration_apply it executed.
type simConfig struct {
	nodeVersion int // the node's applied version is "v<nodeVersion>"
	hubVersion  string
	generation  int64
	// lastCommand and lastResult make a redelivered apply idempotent: the
	// same command is answered with the same result, the version unchanged.
	lastCommand string
	lastResult  wire.ConfigApplyResult
	applies     int64 // configuration_apply commands executed (redeliveries not counted)
}

// report is the configuration part of a report.
func (s *simConfig) report() wire.ReportConfiguration {
	return wire.ReportConfiguration{NodeVersion: "v" + strconv.Itoa(s.nodeVersion), HubVersion: s.hubVersion, Generation: s.generation}
}

// apply applies c (a configuration_apply) and returns its result. The
// payload is never looked at beyond NodeVersion: the simulated node runs
// whatever it is given, and its content and secrets are never printed.
func (s *simConfig) apply(c wire.Command) wire.ConfigApplyResult {
	if c.CommandID != "" && c.CommandID == s.lastCommand {
		return s.lastResult
	}
	s.applies++
	if nv, ok := nodeVersionNumber(c.Payload.NodeVersion); ok && c.Payload.Content == "" {
		// A rollback to one of the node's own versions.
		s.nodeVersion = nv
	} else {
		s.nodeVersion++
	}
	s.hubVersion, s.generation = c.ConfigVersion, c.Generation
	s.lastCommand = c.CommandID
	s.lastResult = wire.ConfigApplyResult{ConfigVersion: c.ConfigVersion, NodeVersion: "v" + strconv.Itoa(s.nodeVersion),
		Added: []string{}, Removed: []string{}, Changed: []string{}, Unchanged: []string{}}
	return s.lastResult
}

// nodeVersionNumber parses a node version id "v<n>".
func nodeVersionNumber(v string) (int, bool) {
	if len(v) < 2 || v[0] != 'v' {
		return 0, false
	}
	n, err := strconv.Atoi(v[1:])
	return n, err == nil && n > 0
}

// Results of the read-only configuration commands: small and constant.
var (
	validateResult = json.RawMessage(`{"valid":true,"errors":[]}`)
	diffResult     = json.RawMessage(`{"changed":false,"streams":{"added":[],"removed":[],"changed":[]}}`)
)

// executeConfig executes an acknowledged configuration command: validate
// and diff succeed with a small result; apply moves the simulated node to
// a new version, succeeds with a wire.ConfigApplyResult and sends a report
// showing it (its streams all running).
func (a *simAgent) executeConfig(ctx context.Context, c wire.Command, resPath string) {
	var result json.RawMessage
	switch c.Operation {
	case wire.CommandConfigValidate:
		result = validateResult
	case wire.CommandConfigDiff:
		result = diffResult
	default:
		a.mu.Lock()
		r := a.conf.apply(c)
		for i := range a.streams {
			a.streams[i].State, a.streams[i].ConfigVersion = "running", r.NodeVersion
		}
		a.mu.Unlock()
		b, err := json.Marshal(r)
		if err != nil {
			return
		}
		result = b
	}
	if a.call(ctx, "result", "POST", resPath, wire.CommandResult{AttemptID: c.AttemptID, State: wire.ResultSucceeded, Result: result}, nil) != nil {
		return
	}
	if c.Operation == wire.CommandConfigApply && a.report(ctx, false) != nil {
		return
	}
	a.done.Add(1)
	if a.executed != nil {
		a.executed(c)
	}
}

// configApplies is how many configuration_apply commands a executed.
func (a *simAgent) configApplies() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conf.applies
}
