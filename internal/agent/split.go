package agent

import (
	"encoding/base64"
	"errors"
	"maps"
	"strings"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/wire"
)

// codeIncompatibleCapability fails a job_start for a split placement on a
// node without a data plane: the Hub placed it on a node that cannot run
// it (the audit's failure code of the same name).
const codeIncompatibleCapability = "incompatible_capability"

// withSplit returns d carrying the command's split placement (none for a
// colocated job).
func (d JobDesire) withSplit(p wire.JobCommand) JobDesire {
	if len(p.TaskNodes) == 0 {
		return d
	}
	d.TaskNodes, d.NodeDataPorts, d.DataSecret = maps.Clone(p.TaskNodes), maps.Clone(p.NodeDataPorts), p.DataSecret
	d.NodeDataFingerprints = maps.Clone(p.NodeDataFingerprints)
	return d
}

// errDataSecret: the data secret is not base64url. Its text never holds
// the value.
var errDataSecret = errors.New("data_secret is not base64url")

// applySplit sets h's split fields from the desire, decoding the secret
// (base64url, padded or not); a colocated job leaves h as it is.
func (d JobDesire) applySplit(h *engine.HubJob) error {
	if len(d.TaskNodes) == 0 {
		return nil
	}
	secret, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(d.DataSecret, "="))
	if err != nil {
		return errDataSecret
	}
	h.TaskNodes, h.DataAddresses, h.DataSecret = maps.Clone(d.TaskNodes), maps.Clone(d.NodeDataPorts), secret
	h.DataFingerprints = maps.Clone(d.NodeDataFingerprints)
	return nil
}

// redactSecret makes the node's log redactor scrub the data secret, as it
// does a Hub job's resolved secret values: nothing logs it, and should
// anything ever print it, the log would not show it.
func (j *jobControl) redactSecret(secret string) {
	if j.secrets != nil && secret != "" {
		j.secrets.Add(secret)
	}
}

// splitFailure is the failure of a job_start for a split placement that
// the engine refused (no data plane: incompatible_capability; a placement
// that does not fit: invalid_payload) or whose mesh the data plane did not
// join (transient job_failed), or nil for another error.
func (j *jobControl) splitFailure(err error, h engine.HubJob) *wire.Failure {
	var be *engine.BuildError
	var ce *config.Error
	switch {
	case err == nil || len(h.TaskNodes) == 0:
		return nil
	case errors.Is(err, engine.ErrNoDataPlane):
		return permanentFailure(codeIncompatibleCapability, "%s", err.Error())
	case errors.Is(err, engine.ErrSplitPlacement):
		return permanentFailure(codeInvalidPayload, "%s", err.Error())
	case errors.As(err, &be), errors.As(err, &ce):
		return nil
	}
	return &wire.Failure{Class: "transient", Code: codeJobFailed, Message: j.redact(err.Error())}
}
