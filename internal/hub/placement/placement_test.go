package placement

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestChoose(t *testing.T) {
	node := func(id string, jobs int, caps ...string) Candidate {
		return Candidate{NodeID: id, Status: "online", Mode: "active", Capabilities: caps, Jobs: jobs}
	}
	with := func(c Candidate, f func(*Candidate)) Candidate { f(&c); return c }
	fleet := []Candidate{
		node("n3", 1, "job_control"),
		node("n1", 2, "job_control", "input:kafka"),
		node("n2", 1, "job_control", "input:kafka"),
		with(node("n4", 0, "job_control"), func(c *Candidate) { c.Status = "unavailable" }),
		with(node("n5", 0, "job_control"), func(c *Candidate) { c.Mode = "draining" }),
		with(node("n6", 0, "job_control"), func(c *Candidate) { c.Mode = "maintenance" }),
		with(node("n7", 0, "job_control"), func(c *Candidate) { c.Status = "unknown" }),
	}
	tests := []struct {
		name    string
		cands   []Candidate
		req     Request
		want    Decision
		reasons map[string]string // set: want a *NoNodeError with these
	}{
		{"least loaded, tie by id", fleet, Request{Required: []string{"job_control"}},
			Decision{NodeID: "n2", Strategy: StrategyLeastLoaded}, nil},
		{"capability narrows", fleet, Request{Required: []string{"job_control", "input:kafka"}},
			Decision{NodeID: "n2", Strategy: StrategyLeastLoaded}, nil},
		{"exclude", fleet, Request{Required: []string{"input:kafka"}, Exclude: []string{"n2"}},
			Decision{NodeID: "n1", Strategy: StrategyLeastLoaded}, nil},
		{"no requirement", fleet, Request{},
			Decision{NodeID: "n2", Strategy: StrategyLeastLoaded}, nil},
		{"candidate order does not matter", []Candidate{fleet[2], fleet[0], fleet[1]}, Request{},
			Decision{NodeID: "n2", Strategy: StrategyLeastLoaded}, nil},
		{"requested, least loaded of them", fleet, Request{Requested: []string{"n1", "n3"}},
			Decision{NodeID: "n3", Strategy: StrategyRequested}, nil},
		{"requested, tie by requested order", fleet, Request{Requested: []string{"n3", "n2"}},
			Decision{NodeID: "n3", Strategy: StrategyRequested}, nil},
		{"requested, tie by requested order reversed", fleet, Request{Requested: []string{"n2", "n3"}},
			Decision{NodeID: "n2", Strategy: StrategyRequested}, nil},
		{"requested, unqualified skipped", fleet, Request{Requested: []string{"n4", "ghost", "n1"}},
			Decision{NodeID: "n1", Strategy: StrategyRequested}, nil},
		{"requested twice", fleet, Request{Requested: []string{"n1", "n1"}},
			Decision{NodeID: "n1", Strategy: StrategyRequested}, nil},
		{"requested beats lighter unrequested", fleet, Request{Requested: []string{"n1"}},
			Decision{NodeID: "n1", Strategy: StrategyRequested}, nil},
		{"duplicate candidate: first wins", []Candidate{node("n1", 0), with(node("n1", 0), func(c *Candidate) { c.Status = "unavailable" })}, Request{},
			Decision{NodeID: "n1", Strategy: StrategyLeastLoaded}, nil},
		{"none qualifies: every reason", fleet, Request{Required: []string{"job_control", "input:kafka"}, Exclude: []string{"n1", "n2"}}, Decision{},
			map[string]string{
				"n1": "excluded", "n2": "excluded", "n3": "missing capability input:kafka",
				"n4": "unavailable", "n5": "draining", "n6": "maintenance", "n7": "unknown",
			}},
		{"requested none qualifies: only those considered", fleet, Request{Requested: []string{"ghost", "n3", "n5"}, Required: []string{"input:kafka"}}, Decision{},
			map[string]string{"ghost": "unknown", "n3": "missing capability input:kafka", "n5": "draining"}},
		{"reason order: status before mode before exclusion before capability", []Candidate{
			{NodeID: "a", Status: "unavailable", Mode: "draining"},
			{NodeID: "b", Status: "online", Mode: "maintenance"},
			{NodeID: "c", Status: "online", Mode: "active"},
			{NodeID: "d", Status: "online", Mode: "paused"},
		}, Request{Required: []string{"x"}, Exclude: []string{"a", "b", "c"}}, Decision{},
			map[string]string{"a": "unavailable", "b": "maintenance", "c": "excluded", "d": `mode "paused"`}},
		{"no candidates", nil, Request{}, Decision{}, map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Choose(tc.cands, tc.req)
			if tc.reasons == nil {
				if err != nil {
					t.Fatalf("Choose: %v", err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Fatalf("Choose (-want +got):\n%s", diff)
				}
				return
			}
			var ne *NoNodeError
			if !errors.As(err, &ne) || !errors.Is(err, ErrNoNode) {
				t.Fatalf("Choose = %+v, %v; want a *NoNodeError wrapping ErrNoNode", got, err)
			}
			if diff := cmp.Diff(tc.reasons, ne.Reasons); diff != "" {
				t.Fatalf("reasons (-want +got):\n%s", diff)
			}
		})
	}
}
