package job

import (
	"fmt"
	"strconv"
)

// Shape is the part of a plan that recovery state is bound to: the state
// format version, the max parallelism, and every operator id with whether it
// keeps state. Kinds (operator id -> kind) only words messages and may be nil.
type Shape struct {
	FormatVersion  int
	MaxParallelism int
	Operators      map[string]bool // operator id -> stateful
	Kinds          map[string]string
}

// Shape returns the plan's shape.
func (p *Plan) Shape() Shape {
	s := Shape{
		FormatVersion:  p.FormatVersion,
		MaxParallelism: p.MaxParallelism,
		Operators:      make(map[string]bool, len(p.Operators)),
		Kinds:          make(map[string]string, len(p.Operators)),
	}
	for _, op := range p.Operators {
		s.Operators[op.ID] = op.Stateful
		s.Kinds[op.ID] = op.Kind
	}
	return s
}

// Incompatibility says why recovery state cannot be restored into a plan:
// Field is format_version, max_parallelism or operators; Have describes the
// state, Want the plan.
type Incompatibility struct {
	Field, Have, Want string
}

// Restorable is the one rule deciding whether recovery state written with
// formatVersion and maxParallelism, holding state of statefulOperators, can
// be restored into a plan of shape s. It returns the first incompatibility
// in the order format version, max parallelism, then statefulOperators in
// the order given, or nil. Every operator holding state must still exist and
// keep state; stateful operators of s the state does not mention start
// empty. The job id and version are not part of the rule: callers that know
// them check the id themselves.
func (s Shape) Restorable(formatVersion, maxParallelism int, statefulOperators []string) *Incompatibility {
	switch {
	case formatVersion != s.FormatVersion:
		return &Incompatibility{Field: "format_version", Have: strconv.Itoa(formatVersion), Want: strconv.Itoa(s.FormatVersion)}
	case maxParallelism != s.MaxParallelism:
		return &Incompatibility{Field: "max_parallelism", Have: strconv.Itoa(maxParallelism), Want: strconv.Itoa(s.MaxParallelism)}
	}
	for _, id := range statefulOperators {
		stateful, ok := s.Operators[id]
		switch {
		case !ok:
			return &Incompatibility{Field: "operators", Have: fmt.Sprintf("state of operator %q", id), Want: fmt.Sprintf("no operator %q", id)}
		case !stateful:
			kind := s.Kinds[id]
			if kind == "" {
				kind = "operator"
			}
			return &Incompatibility{Field: "operators", Have: fmt.Sprintf("state of operator %q", id), Want: fmt.Sprintf("operator %q as a stateless %s", id, kind)}
		}
	}
	return nil
}
