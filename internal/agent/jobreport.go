package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/wire"
)

// maxObservedArtifacts bounds the artifacts of one job observation.
const maxObservedArtifacts = 16

// jobReporter sends job observations (POST agent/job-observations): soon
// after a job changed (engine JobChanges, debounced), at once after a job
// command, when forced (after each register), and every period. It owns
// its sequence and what it already sent, and sends only while the node
// holds Hub jobs (and once more after the last one went).
type jobReporter struct {
	pacer
	x      *executor
	bootID string
	send   func(ctx context.Context, o wire.JobObservations) error
	now    func() time.Time

	// Owned by run.
	sentUpTo map[string]int64    // job id -> the highest artifact id sent
	errSeen  map[string]errSince // job id -> its current error and since when
}

type errSince struct {
	msg string
	at  time.Time
}

func newJobReporter(x *executor, bootID string, send func(context.Context, wire.JobObservations) error, debounce, period time.Duration, b backoff, now func() time.Time) *jobReporter {
	return &jobReporter{pacer: newPacer(debounce, period, b), x: x, bootID: bootID, send: send, now: now,
		sentUpTo: map[string]int64{}, errSeen: map[string]errSince{}}
}

// forceSend asks for observations whether or not anything changed.
func (r *jobReporter) forceSend() {
	r.force.Store(true)
	r.wakeNow()
}

// build observes every Hub job the node holds or has a Hub desire for;
// sent is the highest artifact id each observation carries.
func (r *jobReporter) build(ctx context.Context) (wire.JobObservations, map[string]int64) {
	eng := r.x.jobs.eng
	view := r.x.jobsShown()
	desires := view.desires
	sts := eng.HubJobs()
	obs := wire.JobObservations{BootID: r.bootID, Jobs: make([]wire.JobObservation, 0, len(sts))}
	sent := map[string]int64{}
	for _, st := range sts {
		if len(obs.Jobs) == wire.MaxObservedJobs {
			break
		}
		d := desires[st.JobID]
		o := wire.JobObservation{
			ID: st.JobID, State: string(st.State), Generation: d.Generation, Version: d.Version, ActionID: d.ActionID,
			LastError: r.x.jobs.redact(st.Error), Tasks: make([]wire.JobTask, 0, len(st.Tasks)),
			WatermarkLagMS: st.WatermarkLagMs, CheckpointDurationMS: st.CheckpointDurationMs, CheckpointFailures: st.CheckpointFailures,
			LastCheckpoint: st.LastCheckpoint, StateBytes: st.StateBytes, Restarts: st.Restarts, RestoredFrom: st.RestoredFrom,
		}
		for _, t := range st.Tasks {
			o.Tasks = append(o.Tasks, wire.JobTask{ID: t.ID, State: t.State, Watermark: t.Watermark, RecordsIn: t.RecordsIn, RecordsOut: t.RecordsOut})
		}
		if o.LastError != "" {
			e, ok := r.errSeen[st.JobID]
			if !ok || e.msg != o.LastError {
				e = errSince{msg: o.LastError, at: r.now()}
				r.errSeen[st.JobID] = e
			}
			o.LastErrorAt = wire.At(e.at)
		} else {
			delete(r.errSeen, st.JobID)
		}
		// While a command takes an artifact, the job's new ones wait: the
		// command's own is observed after its outcome, with its id and the
		// desire it recorded.
		if st.LastCheckpoint > r.sentUpTo[st.JobID] && !view.taking[st.JobID] {
			o.Artifacts = r.artifacts(ctx, st.JobID, st.ObjectStoreURI, view)
			for _, a := range o.Artifacts {
				sent[st.JobID] = max(sent[st.JobID], a.ID)
			}
		}
		obs.Jobs = append(obs.Jobs, o)
	}
	// A job the Hub only ever stopped here (created stopped, or the stop a
	// move sends to the node it left) is on no engine: it is observed
	// stopped at the desire's generation, so that the stop converges. One
	// desired running that is on no engine did not start.
	held := make(map[string]bool, len(sts))
	for _, st := range sts {
		held[st.JobID] = true
	}
	ids := make([]string, 0, len(desires))
	for id := range desires {
		if !held[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		if len(obs.Jobs) == wire.MaxObservedJobs {
			break
		}
		d := desires[id]
		state := wire.JobStopped
		if d.State != jobDesiredStopped {
			state = wire.JobFailed
		}
		obs.Jobs = append(obs.Jobs, wire.JobObservation{ID: id, State: state, Generation: d.Generation, Version: d.Version,
			ActionID: d.ActionID, Tasks: []wire.JobTask{}})
	}
	return obs, sent
}

// artifacts lists the job's completed artifacts not sent yet, newest
// maxObservedArtifacts, oldest first, or none when an artifact command
// started since view was read.
func (r *jobReporter) artifacts(ctx context.Context, jobID, storeURI string, view jobView) []wire.JobArtifact {
	var all []*engine.Manifest
	for _, kind := range []string{engine.ArtifactCheckpoint, engine.ArtifactSavepoint} {
		ms, err := r.x.jobs.eng.JobArtifacts(ctx, jobID, kind)
		if err != nil {
			r.x.log.Warn("job observation: list artifacts", "job_id", jobID, "kind", kind, "err", r.x.jobs.redact(err.Error()))
			continue
		}
		for _, m := range ms {
			if m.ID > r.sentUpTo[jobID] {
				all = append(all, m)
			}
		}
	}
	// A command that started after view was read may have written its
	// artifact already, and even finished: the observation after its
	// outcome sends it, with the command's id and at the desire it
	// recorded, which view may predate.
	if r.x.tookSince(view) {
		return nil
	}
	slices.SortFunc(all, func(a, b *engine.Manifest) int { return int(a.ID - b.ID) })
	if len(all) > maxObservedArtifacts {
		all = all[len(all)-maxObservedArtifacts:]
	}
	out := make([]wire.JobArtifact, 0, len(all))
	for _, m := range all {
		by := r.x.takenBy(jobID, m.ID, m.Kind)
		a := r.x.artifactOf(storeURI, m, by.trigger)
		a.OperationID = by.commandID
		out = append(out, a)
	}
	return out
}

// jobChangeKey is what makes observations worth sending at once.
func jobChangeKey(o wire.JobObservations) string {
	type key struct {
		ID, State, ActionID, LastError string
		Generation                     int64
		Version                        int
		Artifacts                      int
	}
	ks := make([]key, len(o.Jobs))
	for i, j := range o.Jobs {
		ks[i] = key{ID: j.ID, State: j.State, ActionID: j.ActionID, LastError: j.LastError, Generation: j.Generation, Version: j.Version, Artifacts: len(j.Artifacts)}
	}
	b, _ := json.Marshal(ks)
	return string(b)
}

// run sends observations until ctx ends, soon after each signal on
// changes. Sequence numbers start at 1 and grow with every body sent.
func (r *jobReporter) run(ctx context.Context, changes <-chan struct{}) {
	var seq int64
	var lastKey string
	hadJobs := false
	r.pacer.run(ctx, changes, func(ctx context.Context, due func(bool) bool) (bool, error) {
		obs, sent := r.build(ctx)
		key := jobChangeKey(obs)
		if !due(key != lastKey) || (len(obs.Jobs) == 0 && !hadJobs) {
			return false, nil
		}
		seq++
		obs.ReportSeq = seq
		if err := r.send(ctx, obs); err != nil {
			return false, err
		}
		for id, n := range sent {
			r.sentUpTo[id] = max(r.sentUpTo[id], n)
		}
		hadJobs = len(obs.Jobs) > 0
		lastKey = key
		return true, nil
	})
}

func (a *Agent) sendJobObservations(ctx context.Context, o wire.JobObservations) error {
	err := a.c.call(ctx, http.MethodPost, "/agent/job-observations", o, nil, 0)
	if err != nil && ctx.Err() == nil && !errors.Is(err, errNoSession) {
		a.log.Warn("job observations failed", "report_seq", o.ReportSeq, "err", err)
	}
	return err
}
