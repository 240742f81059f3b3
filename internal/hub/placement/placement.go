// Package placement decides which node runs a job. It is pure: the caller
// passes every node it knows with its liveness, mode, capabilities and load.
package placement

import "errors"

// Strategies of a placement.
const (
	StrategyRequested   = "requested"    // the create body named node_ids
	StrategyLeastLoaded = "least_loaded" // the Hub chose
)

// Candidate is one node as the Hub sees it now. Jobs is how many jobs are
// placed on it (its load).
type Candidate struct {
	NodeID       string
	Status       string // online, unavailable, unknown
	Mode         string // active, draining, maintenance
	Capabilities []string
	Jobs         int
}

// Request is one placement decision's input. Requested, when not empty,
// restricts the choice to those node ids (in that order of preference);
// Exclude names nodes never to choose (the node a job moves away from).
type Request struct {
	Required  []string
	Requested []string
	Exclude   []string
}

// Decision is the chosen node and the strategy that chose it.
type Decision struct {
	NodeID   string
	Strategy string
}

// ErrNoNode is wrapped by the *NoNodeError Choose returns.
var ErrNoNode = errors.New("placement: no capable node")

// NoNodeError says why no candidate was chosen: a reason per node id
// considered (unknown, unavailable, draining, maintenance, excluded, or
// "missing capability X").
type NoNodeError struct {
	Reasons map[string]string
}

func (e *NoNodeError) Error() string { return ErrNoNode.Error() }
func (e *NoNodeError) Unwrap() error { return ErrNoNode }

// Choose picks a node for a job.
func Choose(cands []Candidate, req Request) (Decision, error) {
	return Decision{}, &NoNodeError{}
}
