package operator

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/state"
	"github.com/goccy/go-json"
)

// NoTime is the Time of a record that has none.
const NoTime = math.MinInt64

// Record is one element of a job's data: a value and its timestamp.
type Record struct {
	// Value is a decoded JSON value (map[string]any, []any, string,
	// float64, bool or nil), or a []byte payload not decoded yet: Data
	// decodes it on first use, so a record only passed along is never parsed.
	Value any
	// Time is the record's event time (or ingestion time in processing
	// time), in milliseconds since the epoch; NoTime when unknown.
	Time int64
}

// Data returns the record's decoded value, decoding a []byte payload as
// JSON first. A payload that is not JSON becomes its text as a string.
func (r *Record) Data() any {
	if b, ok := r.Value.([]byte); ok {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			v = string(b)
		}
		r.Value = v
	}
	return r.Value
}

// Collector receives what an operator emits. Emitted records belong to the
// collector from then on.
type Collector interface {
	// Emit sends r downstream.
	Emit(r Record)
	// EmitLate sends a late record to the operator named by the source's
	// late_event_route (late_event_policy route).
	EmitLate(r Record)
}

// Operator is one operator instance: one subtask of one operator. The
// kernel calls it from the task's goroutine only, in this order: Open once
// (after restoring state), then Process and OnWatermark as data and
// watermarks arrive, Snapshot at each aligned checkpoint barrier, Commit
// once that checkpoint's manifest is durable, and Close once at the end of
// input or on stop. An error from any call fails the task.
type Operator interface {
	// Open prepares the operator; restored state is already in ctx's tables.
	Open(ctx context.Context, oc *Context) error
	// Process handles a batch of records, in arrival order.
	Process(ctx context.Context, in []Record, out Collector) error
	// OnWatermark is called when the task's input watermark advanced to wm:
	// no record with Time <= wm is expected any more (late ones may come).
	OnWatermark(ctx context.Context, wm int64, out Collector) error
	// Snapshot writes the state changed since the last snapshot into the
	// operator's tables; the kernel flushes and checkpoints the store after.
	Snapshot(ctx context.Context, checkpoint int64) error
	// Commit tells the operator that checkpoint is durable.
	Commit(ctx context.Context, checkpoint int64) error
	// Close ends the operator. At the end of input the kernel first calls
	// OnWatermark with math.MaxInt64, so windows still open have fired.
	Close(ctx context.Context) error
}

// Context is what an operator instance is given at Open.
type Context struct {
	Plan      *job.Plan
	Operator  *job.Operator
	Subtask   int
	KeyGroups job.Range // the key groups this subtask owns

	// Store holds the task's keyed state; nil when the job declares no
	// state. Stateful operators keep their live state in memory, write what
	// changed at Snapshot and read it back at Open.
	Store *state.Store
	// Budget accounts live state against state.max_bytes; exceeding it
	// fails the task.
	Budget *state.Budget
	// Restored is true when the store was restored from an artifact.
	Restored bool

	Now    func() time.Time // the clock (processing time, state ttl_ms)
	Logger *slog.Logger

	// LateDropped is called with the number of late records dropped.
	LateDropped func(n int)
}

// New builds the operator of a transforming kind (map, filter, aggregate,
// window, udf) from its plan entry. It compiles expressions and, for udf,
// the WebAssembly module; it does no other I/O.
func New(op *job.Operator) (Operator, error) { return newOperator(op, sandbox.FS{}) }

// NewIn is New reading a udf's module through fsys (a Hub job's: the
// node's remote policy at the moment the module is read).
func NewIn(op *job.Operator, fsys sandbox.FS) (Operator, error) { return newOperator(op, fsys) }

// Key is a compiled key expression (the key of aggregate and window, and of
// the partitioned edge into them), evaluated as map expressions are, with
// the record as this. It is not safe for concurrent use: each task
// compiles its own.
type Key struct {
	expr *compiled
}

// NewKey compiles a key expression such as this.user.
func NewKey(expression string) (*Key, error) {
	c, err := compileExpr("key", expression)
	if err != nil {
		return nil, err
	}
	return &Key{expr: c}, nil
}

// Eval returns the key of r: its value and its canonical bytes
// (job.CanonicalKey) appended to dst.
func (k *Key) Eval(r *Record, dst []byte) (canonical []byte, value any, err error) {
	v, err := k.expr.eval(r, false)
	if err != nil {
		return dst, nil, fmt.Errorf("key: %w", err)
	}
	return job.AppendCanonicalKey(dst, v), v, nil
}
