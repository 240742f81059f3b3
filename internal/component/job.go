package component

import "context"

// The interfaces below let a job's kernel do more with a component than a
// stream does. A component implements those it can; the kernel checks for
// them with a type assertion and says in a build error when a job needs one
// the component lacks.

// Splittable is an input a job can run at parallelism n: each of the n
// instances reads its own share of the data (subtask i of n), and the n
// shares together are exactly the data one instance would read.
type Splittable interface {
	Input
	// Split is called once, before Connect.
	Split(subtask, subtasks int) error
}

// Replayable is an input whose reading position can be saved at a
// checkpoint and resumed from after a restore, so that a job replays
// exactly the data after the checkpoint.
type Replayable interface {
	Input
	// Position returns the position after the last batch Read returned, as
	// a JSON value. It is called from the goroutine that calls Read,
	// between Reads.
	Position() ([]byte, error)
	// Seek makes the next Read continue from pos, a value Position
	// returned. It is called once, after Connect and before the first Read.
	Seek(ctx context.Context, pos []byte) error
}

// Transactional is an output that takes part in a job's checkpoints by
// two-phase commit, so that what it writes is visible exactly once.
// Everything is called from one goroutine.
type Transactional interface {
	Output
	// Begin is called once after Connect with the identity of this
	// instance (the sink operator id and subtask), which scopes its
	// pending data, and with the transactions of the restored checkpoint
	// (none on a fresh start): Begin commits them (Commit is idempotent) and
	// discards every other pending transaction of this identity and of the
	// subtasks whose transactions it was given (restored at a lower
	// parallelism, subtask 0 is given those of the subtasks that are gone).
	Begin(ctx context.Context, operator string, subtask int, restored [][]byte) error
	// Prepare seals what Write accepted since the last Prepare into a
	// pending transaction, durable but not visible, and returns its handle
	// as a JSON value. It is called at checkpoint barrier checkpoint.
	Prepare(ctx context.Context, checkpoint int64) (txn []byte, err error)
	// Commit makes a prepared transaction visible. Committing a
	// transaction again is a no-op.
	Commit(ctx context.Context, txn []byte) error
}

// Rescalable is a Splittable, Replayable input whose read positions can be
// redistributed over another number of subtasks, so that a job restores
// from a checkpoint taken at another parallelism without a gap or a
// repeat.
type Rescalable interface {
	Splittable
	Replayable
	// Rescale returns the position this instance resumes from: its share,
	// as Split set it (subtask 0 of 1 without Split), of what the old
	// subtasks left unread. old[i] is the position old subtask i of
	// len(old) recorded, nil when it had read nothing. The kernel calls it
	// after Split and before Connect, and passes the result to Seek.
	Rescale(old [][]byte) ([]byte, error)
}

// Sampler is an input that knows the shape of its records before it runs,
// so that a job's expressions can be type-checked against it.
type Sampler interface {
	Input
	// Sample returns a record as the job's operators see it (a decoded
	// JSON value), or false when the shape is not known.
	Sample() (any, bool)
}
