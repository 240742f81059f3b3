package job

// Explanation is the JSON form of a plan that --validate prints and the
// Hub serves at GET /jobs/{id}/plan: operator chains and their tasks,
// edges with their partition routes, stateful operators, time policies,
// state and checkpoint policy.
type Explanation struct {
	JobID             string               `json:"job_id"`
	Version           int                  `json:"version"`
	FormatVersion     int                  `json:"format_version"`
	MaxParallelism    int                  `json:"max_parallelism"`
	Chains            []ExplainedChain     `json:"chains"`
	Edges             []ExplainedEdge      `json:"edges"`
	StatefulOperators []ExplainedStateful  `json:"stateful_operators"`
	Time              []ExplainedTime      `json:"time"`
	State             *ExplainedState      `json:"state,omitempty"`
	Checkpoint        *ExplainedCheckpoint `json:"checkpoint,omitempty"`
	Recovery          string               `json:"recovery"`
}

// ExplainedChain is one chain: operators run as direct calls in one task
// per subtask.
type ExplainedChain struct {
	ID          string          `json:"id"`
	Operators   []string        `json:"operators"`
	Parallelism int             `json:"parallelism"`
	Tasks       []ExplainedTask `json:"tasks"`
}

// ExplainedTask is one subtask of a chain and the key groups it owns.
type ExplainedTask struct {
	ID        string `json:"id"`
	Subtask   int    `json:"subtask"`
	KeyGroups Range  `json:"key_groups"`
}

// ExplainedEdge is one edge; Routes, on partitioned edges, says which key
// groups each downstream subtask receives.
type ExplainedEdge struct {
	ID      string           `json:"id"`
	From    string           `json:"from"`
	To      string           `json:"to"`
	Mode    string           `json:"mode"`
	Chained bool             `json:"chained"`
	Key     string           `json:"key,omitempty"`
	Routes  []ExplainedRoute `json:"routes,omitempty"`
}

// ExplainedRoute is the key-group range one downstream subtask receives.
type ExplainedRoute struct {
	Subtask   int   `json:"subtask"`
	KeyGroups Range `json:"key_groups"`
}

// ExplainedStateful is an operator that keeps keyed state.
type ExplainedStateful struct {
	ID     string      `json:"id"`
	Kind   string      `json:"kind"`
	Key    string      `json:"key"`
	Window *WindowSpec `json:"window,omitempty"`
}

// ExplainedTime is the time declaration of one source operator.
type ExplainedTime struct {
	Source            string `json:"source"`
	Mode              string `json:"mode"`
	TimestampField    string `json:"timestamp_field,omitempty"`
	Watermark         string `json:"watermark,omitempty"`
	OutOfOrdernessMs  int64  `json:"out_of_orderness_ms"`
	IdleTimeoutMs     int64  `json:"idle_timeout_ms"`
	AllowedLatenessMs int64  `json:"allowed_lateness_ms"`
	LateEventPolicy   string `json:"late_event_policy,omitempty"`
	LateEventRoute    string `json:"late_event_route,omitempty"`
}

// ExplainedState is the job's state backend.
type ExplainedState struct {
	Backend                string `json:"backend"`
	Durability             string `json:"durability"`
	FormatVersion          int    `json:"format_version"`
	Namespace              string `json:"namespace,omitempty"`
	TTLMs                  int    `json:"ttl_ms"`
	MaxBytes               *int64 `json:"max_bytes,omitempty"`
	MaxPendingTransactions int    `json:"max_pending_transactions"`
}

// ExplainedCheckpoint is the job's checkpoint policy.
type ExplainedCheckpoint struct {
	IntervalMs     int    `json:"interval_ms"`
	Retention      int    `json:"retention"`
	ObjectStoreURI string `json:"object_store_uri"`
}

// Explain describes p. Source operators without a time declaration are
// listed with mode processing_time. The state root is left out: it is a
// path of the node, not of the job.
func (p *Plan) Explain() Explanation {
	x := Explanation{
		JobID:             p.JobID,
		Version:           p.Version,
		FormatVersion:     p.FormatVersion,
		MaxParallelism:    p.MaxParallelism,
		Chains:            []ExplainedChain{},
		Edges:             []ExplainedEdge{},
		StatefulOperators: []ExplainedStateful{},
		Time:              []ExplainedTime{},
		Recovery:          p.Recovery,
	}
	for _, c := range p.Chains {
		ec := ExplainedChain{ID: c.ID, Operators: c.Operators, Parallelism: c.Parallelism, Tasks: []ExplainedTask{}}
		for _, t := range p.Tasks {
			if t.Chain == c.ID {
				ec.Tasks = append(ec.Tasks, ExplainedTask{ID: t.ID, Subtask: t.Subtask, KeyGroups: t.KeyGroups})
			}
		}
		x.Chains = append(x.Chains, ec)
	}
	for _, e := range p.Edges {
		ee := ExplainedEdge{ID: e.ID, From: e.From, To: e.To, Mode: e.Mode, Chained: e.Chained, Key: e.Key}
		if to := p.Operator(e.To); e.Mode == Partitioned && to != nil {
			for s := range to.Parallelism {
				ee.Routes = append(ee.Routes, ExplainedRoute{Subtask: s, KeyGroups: RangeOf(s, to.Parallelism, p.MaxParallelism)})
			}
		}
		x.Edges = append(x.Edges, ee)
	}
	for _, op := range p.Operators {
		switch {
		case op.Aggregate != nil:
			x.StatefulOperators = append(x.StatefulOperators, ExplainedStateful{ID: op.ID, Kind: op.Kind, Key: op.Aggregate.Key})
		case op.Window != nil:
			w := op.Window.Window
			x.StatefulOperators = append(x.StatefulOperators, ExplainedStateful{ID: op.ID, Kind: op.Kind, Key: op.Window.Key, Window: &w})
		}
		if op.Kind != "source" {
			continue
		}
		t := ExplainedTime{Source: op.ID, Mode: "processing_time"}
		if tp := op.Time; tp != nil {
			t = ExplainedTime{
				Source:            op.ID,
				Mode:              tp.Mode,
				TimestampField:    tp.TimestampField,
				Watermark:         tp.Strategy,
				OutOfOrdernessMs:  tp.OutOfOrdernessMs,
				IdleTimeoutMs:     tp.IdleTimeoutMs,
				AllowedLatenessMs: tp.AllowedLatenessMs,
				LateEventPolicy:   tp.LatePolicy,
				LateEventRoute:    tp.LateRoute,
			}
		}
		x.Time = append(x.Time, t)
	}
	if s := p.State; s != nil {
		x.State = &ExplainedState{
			Backend:                s.Backend,
			Durability:             s.Durability,
			FormatVersion:          p.FormatVersion,
			Namespace:              s.Namespace,
			TTLMs:                  s.TTLMs,
			MaxBytes:               s.MaxBytes,
			MaxPendingTransactions: s.MaxPendingTransactions,
		}
	}
	if c := p.Checkpoint; c != nil {
		x.Checkpoint = &ExplainedCheckpoint{IntervalMs: c.IntervalMs, Retention: c.Retention, ObjectStoreURI: c.ObjectStoreURI}
	}
	return x
}
