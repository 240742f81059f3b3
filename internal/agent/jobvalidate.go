package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/wire"
)

// jobControl is what job commands need of the node: its engine, and the
// registry and secret resolver its configuration is materialized with.
type jobControl struct {
	eng      *engine.Engine
	reg      *component.Registry
	resolver secretref.Resolver
	secrets  *config.Redactor // the node's log redactor; Hub jobs' secret values join it
}

func (j *jobControl) redact(s string) string { return j.secrets.String(s) }

// Job check names and statuses (wire.JobCheck).
const (
	checkComponents    = "components"
	checkSecrets       = "secrets"
	checkStateBackend  = "state_backend"
	checkArtifactStore = "artifact_store"
	checkSpec          = "spec"
	checkPolicy        = "policy"

	checkPassed  = "passed"
	checkFailed  = "failed"
	checkSkipped = "skipped"
)

// validateJob is job_validate: read-only checks of a spec on this node.
// It materializes the spec as job_start does, and checks that the state
// root can be written and that the artifact store answers. No message
// holds a resolved secret value.
func (x *executor) validateJob(ctx context.Context, spec json.RawMessage) wire.JobValidation {
	v := wire.JobValidation{NodeID: x.nodeID, Checks: []wire.JobCheck{}}
	failed := map[string]bool{}
	add := func(check, status, path, msg string) {
		if status == checkFailed {
			failed[check] = true
		}
		v.Checks = append(v.Checks, wire.JobCheck{Check: check, Status: status, Path: path, Message: msg})
	}
	doc, err := json.Marshal(map[string]any{"streams": []any{}, "jobs": []json.RawMessage{spec}})
	if len(spec) == 0 || err != nil {
		add(checkSpec, checkFailed, specPath, "the command carries no job spec")
		v.Valid = false
		return v
	}
	// The node's remote policy before anything resolves: a refused
	// spec is not looked at further.
	if ps := x.policyDocument(doc); len(ps) > 0 {
		for _, p := range ps {
			add(checkPolicy, checkFailed, p.Path, p.Message)
		}
		v.Valid = false
		return v
	}
	// Secret references first, so that their problems are named once.
	secretPaths := map[string]bool{}
	if tree, err := config.Tree(doc, config.JSON); err == nil {
		if _, _, err := x.jobs.resolver.ResolveValues(tree); err != nil {
			refs, _ := secretref.Errors(err)
			for _, se := range refs {
				p := specProblems([]config.Problem{{Path: se.Path}})[0].Path
				secretPaths[p] = true
				add(checkSecrets, checkFailed, p, se.Ref+": "+se.Err.Error())
			}
		}
	}
	cfg, err := config.Materialize(doc, config.JSON, x.jobs.reg, x.jobs.resolver)
	probs := specProblems(config.Problems(err))
	if err == nil {
		probs = specProblems(cfg.Redact(engine.CheckIn(cfg, x.jobs.reg, x.sandbox())))
	}
	for _, p := range probs {
		switch {
		case secretPaths[p.Path]:
		case strings.HasSuffix(p.Path, ".input_type"), strings.HasSuffix(p.Path, ".output_type"),
			strings.Contains(p.Path, ".sources[") && strings.HasSuffix(p.Path, ".config"),
			strings.Contains(p.Path, ".sinks[") && strings.HasSuffix(p.Path, ".config"):
			add(checkComponents, checkFailed, p.Path, p.Message)
		default:
			add(checkSpec, checkFailed, p.Path, p.Message)
		}
	}
	for _, c := range []string{checkSpec, checkComponents, checkSecrets} {
		if !failed[c] {
			add(c, checkPassed, "", "")
		}
	}
	if cfg == nil || len(cfg.Jobs) != 1 {
		add(checkStateBackend, checkSkipped, "", "the spec could not be read")
		add(checkArtifactStore, checkSkipped, "", "the spec could not be read")
		v.Valid = false
		return v
	}
	if len(probs) == 0 {
		for _, p := range x.policyConfig(cfg) {
			add(checkPolicy, checkFailed, p.Path, p.Message)
		}
		if failed[checkPolicy] {
			v.Valid = false
			return v
		}
	}
	j := cfg.Jobs[0]
	switch {
	case j.State == nil:
		add(checkStateBackend, checkSkipped, "", "the job keeps no state")
	case j.State.Backend != "embedded_kv":
		add(checkStateBackend, checkFailed, specPath+".state.backend", "state backend "+j.State.Backend+" is not available on this node (embedded_kv is)")
	default:
		root := j.State.Root
		path := specPath + ".state.root"
		if root == "" {
			root, path = x.jobs.eng.JobStateRoot(), specPath+".state"
		}
		if root == "" {
			add(checkStateBackend, checkFailed, path, "no state root: set state.root, or run the node with a state directory")
		} else if err := writable(root); err != nil {
			add(checkStateBackend, checkFailed, path, "the state root cannot be written: "+err.Error())
		} else {
			add(checkStateBackend, checkPassed, "", "")
		}
	}
	if j.Checkpoint == nil {
		add(checkArtifactStore, checkSkipped, "", "the job has no checkpoint configuration")
	} else if err := probeStore(ctx, j.ID, j.Checkpoint.ObjectStoreURI, x.sandbox()); err != nil {
		add(checkArtifactStore, checkFailed, specPath+".checkpoint.object_store_uri", cfg.Redactor().String(x.jobs.redact(err.Error())))
	} else {
		add(checkArtifactStore, checkPassed, "", "")
	}
	v.Valid = len(failed) == 0
	return v
}

// writable checks, without changing anything that stays, that dir could
// be created and written: its nearest existing ancestor takes a file.
func writable(dir string) error {
	d := filepath.Clean(dir)
	for {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return errors.New("a path component is not a directory")
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return reason(err)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return errors.New("no ancestor directory exists")
		}
		d = parent
	}
	f, err := os.CreateTemp(d, ".flowplane-validate-*")
	if err != nil {
		return reason(err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// reason drops the path of a file system error: messages to the Hub never
// hold a file path.
func reason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// probeStore opens the job's artifact store and reads its fence: the
// store is reachable and readable.
func probeStore(ctx context.Context, jobID, uri string, sb engine.Sandbox) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return engine.ProbeArtifacts(ctx, jobID, uri, sb)
}
