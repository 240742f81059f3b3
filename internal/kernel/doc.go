// Package kernel runs one job on one node: a task goroutine per chain and
// subtask, joined by bounded channels that carry data, watermarks and
// checkpoint barriers in order; a coordinator that injects barriers, writes
// manifests and commits them; and recovery from checkpoints and savepoints.
//
// The plan comes from package job, operators from package operator, state
// and artifacts from package state, sources and sinks from the component
// registry. The kernel does not know about nodes, HTTP or the Hub.
//
// # Build
//
// Build constructs, per task, the input of a chain's source (split with
// component.Splittable when the source runs at parallelism > 1), the
// outputs of its sinks, its transforming operators (operator.New) and the
// compiled keys of its partitioned edges (operator.NewKey), and returns
// every problem at once as a *BuildError whose paths are those of the job
// configuration (Options.Spec gives the indexes). Each attempt of Run
// builds its own instances; the first one uses Build's.
//
// # Tasks and channels
//
// A task is a mailbox loop. A task with inputs runs one forwarder
// goroutine per input channel that hands elements to the loop; after a
// barrier a forwarder waits until the loop releases it, which is how
// alignment holds an input without buffering. A source task runs one
// reader goroutine that calls Read and, for a component.Replayable input,
// Position right after it, and hands (batch, ack, position) over a channel
// of one: the position recorded at a barrier is exactly after the last
// batch processed, and a task that cannot send downstream stops the reads.
//
// One channel of 16 elements joins each connected pair of (upstream
// subtask, downstream subtask) of an edge that is not chained. An element
// is a batch of up to 1024 records, a watermark, a barrier, an idle marker
// or the end of input. Records are gathered per downstream subtask and a
// partial batch is sent before any watermark, barrier, idle marker or end,
// and on the task's timer (50 ms). Routing: forward and late edges send to
// subtask i mod parallelism; rebalance round-robins record by record;
// partitioned computes the key group of the record's canonical key and
// sends to job.SubtaskOf (a key that cannot be computed fails the task,
// as it would in the keyed operator). Chained operators are direct calls: what an
// operator emits during a call is handed on when the call returns.
// Operators must treat the values of records they are given as read-only:
// an emitted record may reach several consumers.
//
// # Time
//
// A source subtask stamps records with the top-level timestamp_field of
// the decoded value (a number of ms since the epoch or an RFC 3339 string)
// in event time, dropping and counting records without one
// (svc_job_records_dropped_total, reason timestamp), or with the clock
// otherwise. Its watermark is max seen - out_of_orderness_ms - 1
// (bounded_out_of_orderness), max seen - 1 (monotonous) or now - 1
// (processing time); it is sent on the task's timer rather than after
// every batch, since each watermark flushes every partial batch of the
// task's channels. After idle_timeout_ms
// without records it sends an idle marker. A task's watermark is the
// minimum over its inputs that neither ended nor are idle; it never goes
// back. When it advances, OnWatermark is called on every operator of the
// chain in order and the watermark is forwarded. When every input of a
// task is idle the task forwards an idle marker; its next watermark or
// record makes it active again. A finite source sends watermark
// math.MaxInt64 when its input ends.
//
// # Checkpoints
//
// A coordinator per attempt injects barrier N into every source task on
// Checkpoint.IntervalMs and on demand, one checkpoint at a time; ids are
// shared with savepoints and continue past every artifact of the job. On
// an aligned barrier a task calls Snapshot on its operators (a sink with a
// component.Transactional output prepares a transaction), checkpoints its
// Pebble store into a local directory, records its source position,
// forwards the barrier and uploads the directory in the background to
// state.Prefix(job, kind, N)+"<chain>/<subtask>/", then acknowledges with
// the artifact, the positions and every transaction its sinks hold
// prepared but not committed (older ones included). With every
// acknowledgement in, the coordinator commits the manifest (the commit
// point), sets each task's commit mark (tasks then call Commit on their
// operators, which commits sink transactions up to N, and acknowledge the
// source batches read before N), applies retention (state.Expired with the
// checkpoint ids of the listed transactions pinned; savepoints are never
// removed) and cleans incomplete artifacts. A failed acknowledgement or a
// checkpoint older than 10 intervals (at least a minute, at most ten) is
// abandoned and counted; the job goes on. A sink holding more than
// state.max_pending_transactions prepared transactions fails its task.
//
// When every source has ended the coordinator takes a final checkpoint (so
// transactional sinks commit the tail), then tells the sources to finish:
// end-of-input flows down, every task commits, closes its operators and
// ends, and the job is Completed. Without a checkpoint configuration
// nothing is checkpointed, source batches are acknowledged once processed
// and transactional sinks prepare and commit every second and at the end,
// each commit numbered by the job's clock (Options.Now) in nanoseconds
// (kept increasing) where a checkpoint would give its id.
//
// # State and recovery
//
// A task with a stateful operator has a Pebble store in
// <root>/<namespace or job id>/<chain>/<subtask>/store, emptied at every
// start and then restored. The recovery mode is Options.Recovery, else the
// plan's: latest_checkpoint, latest_savepoint, fail (start empty, and a
// task failure ends the job Failed) or none (start empty). The chosen
// manifest is checked with Manifest.Compatible before anything starts;
// so is the parallelism of sources with recorded positions. A task
// restores the old task artifacts whose key-group ranges overlap its own
// (rescaling), its source seeks to the position of the same subtask (at
// another parallelism: to what component.Rescalable.Rescale makes of
// every old subtask's position; a source whose input is not Rescalable
// refuses the artifact before anything starts), and its sinks Begin with
// the listed transactions of the same subtask (subtask 0 also takes those
// of old subtasks beyond the new parallelism, and cleans up after them).
// Durability ephemeral restores nothing.
//
// A task error stops every task; the job is Recovering and restarts from
// the newest complete artifact, checkpoint or savepoint (the recovery mode
// only chooses where Run starts: after that, the output committed so far
// is consistent with the newest artifact alone, and an older one would
// replay committed data), as the plan's restart strategy allows
// (restart.go: failure_rate, fixed_delay or none; the pause doubles from
// delay_ms to max_delay_ms, back to delay_ms once an attempt completed a
// checkpoint); once it gives up the job is Failed with the strategy's
// reason wrapping the failure. Errors wrapping state.ErrBudget, build
// problems and incompatible artifacts are not retried: the job is Failed.
// The last failure stays in Observation.LastError after a recovery.
//
// Stop with a savepoint takes it first (an error leaves the job running),
// then cancels every task: Stopping, then Stopped.
//
// # Split placement
//
// With Options.Split the job runs on several nodes and each builds and
// runs only its own tasks. An edge whose two subtasks are on different
// nodes is a data-plane stream (package dataplane) instead of a channel:
// the router writes to a netOutlet, the receiving task's input reads frames
// (codec.go: records in a tagged binary form, watermarks, barriers, idle and
// end in band and in order), and the stream's credits bound it as the
// channel's capacity does.
//
// The node of the plan's first task coordinates (job.Plan.Coordinator):
// it runs the coordinator over every task of every node. The others
// follow. They keep a control session with the coordinator (a stream each
// way). Every attempt is global: once every follower's session is up, the
// coordinator chooses the artifact (as above), names the attempt with a
// random epoch and sends start to each follower with the artifact's kind
// and id; barriers, commits and finish go to the followers' tasks as
// messages, their acknowledgements and ended sources come back, and the
// manifest, written last by the coordinator, lists every task of every
// node (artifacts are in the shared object store, so any node can restore
// any task, and a new placement redistributes key groups as a rescale
// does). A failure anywhere — a task, a stream whose link broke (heartbeats
// bound how long that takes to notice), a lost control session — fails the
// attempt on the coordinator, which sends abort and, once every follower
// is back, starts the next attempt from the newest artifact. The job ends
// when the coordinator's Run ends: it sends end with the final state, and
// the followers end in it. Control messages carry the fence generation:
// another placement's are ignored. A follower refuses Checkpoint and
// Savepoint (ErrNotCoordinator); its Stop with a savepoint waits for the
// coordinator to end the job.
package kernel
