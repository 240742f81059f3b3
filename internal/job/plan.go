package job

import "github.com/flowplane/flowplane/internal/config"

// Plan is a validated job ready to run: its operators in topological
// order, the edges between them, the chains those edges form and one task
// per chain and subtask. A Plan is a value; the kernel only reads it.
type Plan struct {
	JobID          string
	Version        int
	MaxParallelism int
	// FormatVersion is the state format recovery artifacts are bound to:
	// the job's state.format_version (1 when the job has no state).
	FormatVersion int

	Operators []Operator // topological order: every edge goes from a lower index to a higher one
	Edges     []Edge
	Chains    []Chain // in the order of their first operator
	Tasks     []Task  // chain by chain, subtask by subtask

	State      *config.JobState   // nil when the job declares none
	Checkpoint *config.Checkpoint // nil when the job declares none
	Recovery   string             // latest_checkpoint, latest_savepoint or fail
	// Restart is the job's restart strategy, config.DefaultRestartStrategy
	// when it declares none.
	Restart *config.RestartStrategy
}

// Operator is one operator of the plan.
type Operator struct {
	ID          string
	Kind        string // source, map, filter, aggregate, window, udf, sink
	Parallelism int
	Chain       string // id of the chain it belongs to
	Stateful    bool   // keeps keyed state (aggregate, window)
	Inputs      []int  // indexes into Plan.Edges whose To is this operator
	Outputs     []int  // indexes into Plan.Edges whose From is this operator

	// Exactly one of these is set, by Kind.
	Map       *MapConfig
	Filter    *FilterConfig
	Aggregate *AggregateConfig
	Window    *WindowConfig
	UDF       *UDFConfig
	Source    *config.Source // the sources[] entry bound to it
	Sink      *config.Sink   // the sinks[] entry bound to it

	// Time is the event-time policy in force at this operator: the source's
	// own declaration on a source, and on every operator downstream of a
	// source with a time declaration the policy it inherits. Nil means
	// processing time with no lateness handling.
	Time *TimePolicy
}

// MapConfig is a map operator's config: Expression returns the new record.
type MapConfig struct {
	Expression string `json:"expression"`
}

// FilterConfig is a filter operator's config: records for which Condition
// is true pass.
type FilterConfig struct {
	Condition string `json:"condition"`
}

// Aggregation is one named aggregate over the records of a key (and window).
type Aggregation struct {
	Name       string `json:"name"`
	Function   string `json:"function"`             // count, sum, min, max, avg, first, last
	Expression string `json:"expression,omitempty"` // the value aggregated; not needed by count
}

// AggregateConfig is an aggregate operator's config: a running aggregate
// per key, emitted on every change.
type AggregateConfig struct {
	Key          string        `json:"key"`
	Aggregations []Aggregation `json:"aggregations"`
}

// WindowSpec is a window assigner.
type WindowSpec struct {
	Type    string `json:"type"` // tumbling, sliding, session
	SizeMs  int64  `json:"size_ms,omitempty"`
	SlideMs int64  `json:"slide_ms,omitempty"`
	GapMs   int64  `json:"gap_ms,omitempty"`
}

// WindowConfig is a window operator's config: one result per key and window.
type WindowConfig struct {
	Key          string        `json:"key"`
	Window       WindowSpec    `json:"window"`
	Aggregations []Aggregation `json:"aggregations"`
}

// UDFConfig is a udf operator's config: a WebAssembly module and the
// function it exports.
type UDFConfig struct {
	Module   string `json:"module"`
	Function string `json:"function"`
}

// TimePolicy is the event-time declaration of a source, as seen by the
// operators downstream of it.
type TimePolicy struct {
	Mode              string // event_time or processing_time
	TimestampField    string
	Strategy          string // bounded_out_of_orderness or monotonous
	OutOfOrdernessMs  int64
	IdleTimeoutMs     int64
	AllowedLatenessMs int64
	LatePolicy        string // drop, route or update
	LateRoute         string // operator id receiving late events (policy route)
}

// Edge modes.
const (
	Forward     = "forward"     // same subtask; chained when both ends have equal parallelism
	Rebalance   = "rebalance"   // round robin (unpartitioned edge between unequal parallelisms)
	Partitioned = "partitioned" // by key group
	Late        = "late"        // a late-event side output to the operator named by late_event_route; never chained, though its ends may share a chain
)

// Edge is a connection between two operators.
type Edge struct {
	ID      string
	From    string
	To      string
	Mode    string // Forward, Rebalance, Partitioned or Late
	Chained bool   // From and To run in the same task, as direct calls
	// Key is the key expression records are partitioned by on a Partitioned
	// edge: the key of the downstream keyed operator.
	Key string
}

// Chain is a run of operators joined by chained forward edges; it runs as
// Parallelism tasks.
type Chain struct {
	ID          string   // the id of its first operator
	Operators   []string // in order along the chain
	Parallelism int
}

// Task is one subtask of one chain.
type Task struct {
	ID        string // "<chain id>#<subtask>"
	Chain     string
	Subtask   int
	KeyGroups Range // the key groups this subtask owns
}

// Build validates j beyond what the configuration schema checks (operator
// configs, expressions, chains, time policies) and returns its plan, or the
// problems found, each with its configuration path under prefix (for
// example "jobs[0]").
func Build(prefix string, j config.Job) (*Plan, []config.Problem) {
	return build(prefix, j)
}

// Operator returns the operator with the given id, or nil.
func (p *Plan) Operator(id string) *Operator {
	for i := range p.Operators {
		if p.Operators[i].ID == id {
			return &p.Operators[i]
		}
	}
	return nil
}

// Coordinator is the node that coordinates a split job's checkpoints and
// attempts: the node of the plan's first task ("" when taskNodes does not
// place it).
func (p *Plan) Coordinator(taskNodes map[string]string) string {
	if len(p.Tasks) == 0 {
		return ""
	}
	return taskNodes[p.Tasks[0].ID]
}
