package placement

import (
	"errors"
	"slices"
	"strconv"

	"github.com/flowplane/flowplane/internal/wire"
)

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
	// DataAddress is the host:port the node's data plane listens on ("":
	// none); a split placement needs it. DataFingerprint is its
	// certificate's fingerprint, which the job's links pin.
	DataAddress     string
	DataFingerprint string
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
// considered (unknown, unavailable, draining, maintenance, excluded,
// "missing capability X", or `mode "X"` for a mode other than those), the
// first that applies in that order.
type NoNodeError struct {
	Reasons map[string]string
}

func (e *NoNodeError) Error() string { return ErrNoNode.Error() }
func (e *NoNodeError) Unwrap() error { return ErrNoNode }

// Reasons a node considered was not chosen (NoNodeError.Reasons values);
// a missing capability reads ReasonMissingCapability + " " + capability.
const (
	ReasonUnknown           = "unknown"
	ReasonUnavailable       = "unavailable"
	ReasonDraining          = "draining"
	ReasonMaintenance       = "maintenance"
	ReasonExcluded          = "excluded"
	ReasonMissingCapability = "missing capability"
	// ReasonNoDataAddress: the node advertises no data address, so no
	// peer can reach its data plane (split placement only).
	ReasonNoDataAddress = "no data address"
)

// Choose picks a node for a job (the rules are in the package
// documentation). It returns a *NoNodeError, wrapping ErrNoNode, with a
// reason for every node considered when none qualifies. A candidate listed
// twice counts once, as its first entry.
func Choose(cands []Candidate, req Request) (Decision, error) {
	byID := make(map[string]Candidate, len(cands))
	for _, c := range cands {
		if _, dup := byID[c.NodeID]; !dup {
			byID[c.NodeID] = c
		}
	}
	strategy := StrategyRequested
	considered := unique(req.Requested)
	if len(considered) == 0 {
		strategy = StrategyLeastLoaded
		considered = make([]string, 0, len(byID))
		for id := range byID {
			considered = append(considered, id)
		}
		slices.Sort(considered)
	}
	reasons := map[string]string{}
	best, found := Candidate{}, false
	for _, id := range considered {
		c, known := byID[id]
		if !known {
			reasons[id] = ReasonUnknown
			continue
		}
		if why := disqualified(c, req); why != "" {
			reasons[id] = why
			continue
		}
		// considered is in preference order, so only a strictly lighter
		// load displaces the best so far.
		if !found || c.Jobs < best.Jobs {
			best, found = c, true
		}
	}
	if !found {
		return Decision{}, &NoNodeError{Reasons: reasons}
	}
	return Decision{NodeID: best.NodeID, Strategy: strategy}, nil
}

// disqualified says why c cannot take the job, or "" when it can.
func disqualified(c Candidate, req Request) string {
	switch c.Status {
	case "online":
	case "unavailable":
		return ReasonUnavailable
	default:
		return ReasonUnknown
	}
	switch c.Mode {
	case wire.NodeModeActive:
	case wire.NodeModeDraining:
		return ReasonDraining
	case wire.NodeModeMaintenance:
		return ReasonMaintenance
	default:
		return "mode " + strconv.Quote(c.Mode)
	}
	if slices.Contains(req.Exclude, c.NodeID) {
		return ReasonExcluded
	}
	for _, r := range req.Required {
		if !slices.Contains(c.Capabilities, r) {
			return ReasonMissingCapability + " " + r
		}
	}
	return ""
}

// unique returns ids without repeats, first occurrence kept.
func unique(ids []string) []string {
	var out []string
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
