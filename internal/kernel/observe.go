package kernel

// Observation is a point-in-time view of a running job.
type Observation struct {
	JobID   string `json:"job_id"`
	Version int    `json:"version"`
	State   State  `json:"state"`
	// Error is why the job is Failed or Recovering; empty once it runs
	// again.
	Error string `json:"error,omitempty"`
	// LastError is the last failure of an attempt, kept after the job
	// recovered from it.
	LastError string       `json:"last_error,omitempty"`
	Tasks     []TaskStatus `json:"tasks"`
	// WatermarkLagMs is processing time minus the lowest task watermark.
	WatermarkLagMs       int64  `json:"watermark_lag_ms"`
	LastCheckpoint       int64  `json:"last_checkpoint,omitempty"`
	CheckpointDurationMs int64  `json:"checkpoint_duration_ms"`
	CheckpointFailures   int64  `json:"checkpoint_failures"`
	StateBytes           int64  `json:"state_bytes"`
	Restarts             int    `json:"restarts"`
	RestoredFrom         string `json:"restored_from,omitempty"` // "checkpoint 12", "savepoint 3"
}

// TaskStatus is one task's observed state: created, starting, running,
// ended (its source is done, the task waits for the final checkpoint),
// finished, stopped or failed.
type TaskStatus struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	Watermark  int64  `json:"watermark"`
	RecordsIn  int64  `json:"records_in"`
	RecordsOut int64  `json:"records_out"`
}

// Observe returns the job's current observation.
func (j *Job) Observe() Observation {
	j.mu.Lock()
	o := Observation{
		JobID: j.plan.JobID, Version: j.plan.Version, State: j.st,
		LastCheckpoint: j.lastCkpt, CheckpointDurationMs: j.ckptDurMs, CheckpointFailures: j.ckptFails,
		StateBytes: j.stBytes, Restarts: j.restarts, RestoredFrom: j.restored,
	}
	if j.err != nil {
		o.Error = j.err.Error()
	}
	if j.lastErr != nil {
		o.LastError = j.lastErr.Error()
	}
	tasks := j.tasks
	j.mu.Unlock()
	o.Tasks = make([]TaskStatus, 0, len(tasks))
	for _, t := range tasks {
		s, _ := t.status.Load().(string)
		o.Tasks = append(o.Tasks, TaskStatus{
			ID: t.spec.ID, State: s, Watermark: t.obsWM.Load(),
			RecordsIn: t.recordsIn.Load(), RecordsOut: t.recordsOut.Load(),
		})
	}
	if wm, ok := lowestWatermark(tasks); ok {
		o.WatermarkLagMs = max(j.opts.Now().UnixMilli()-wm, 0)
	}
	return o
}
