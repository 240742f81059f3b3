package config_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/secretref"
)

// TestArrayLimits: an array beyond its limit is reported at its path and
// only its first items are checked; the problems are capped.
func TestArrayLimits(t *testing.T) {
	proc := `{"type": "filter", "expression": "true"},`
	tests := []struct {
		name, doc, path, msg string
	}{
		{name: "streams", doc: `{"streams": [` + strings.Repeat(`{},`, 1030) + `{}]}`,
			path: "streams", msg: "1031 items; at most 1024 are allowed"},
		{name: "processors", doc: `{"streams": [{"input": {"type": "generate", "context": "{}"}, "output": {"type": "drop"}, "pipeline": {"processors": [` + strings.Repeat(proc, 300) + `{"type": "filter", "expression": "true"}]}}]}`,
			path: "streams[0].pipeline.processors", msg: "301 items; at most 256 are allowed"},
		{name: "component array", doc: `{"streams": [{"input": {"type": "memory", "messages": [` + strings.Repeat(`"m",`, config.MaxArrayItems) + `"m"]}, "output": {"type": "drop"}, "pipeline": {"processors": []}}]}`,
			path: "streams[0].input.messages", msg: fmt.Sprintf("%d items; at most %d are allowed", config.MaxArrayItems+1, config.MaxArrayItems)},
		{name: "hub_urls", doc: `{"streams": [], "health_check": {"node_token": "t", "hub_urls": [` + strings.Repeat(`"http://h",`, 16) + `"http://h"]}}`,
			path: "health_check.hub_urls", msg: "17 items; at most 16 are allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Materialize([]byte(tt.doc), config.JSON, component.Default, secretref.Resolver{})
			ps := config.Problems(err)
			found := false
			for _, p := range ps {
				found = found || (p.Path == tt.path && strings.HasPrefix(p.Message, tt.msg))
			}
			if !found {
				t.Errorf("no %s: %s problem in %v", tt.path, tt.msg, ps)
			}
			if len(ps) > config.MaxProblems+1 {
				t.Errorf("%d problems listed", len(ps))
			}
		})
	}
}

// TestProblemsCapped: past MaxProblems, one last problem counts the rest.
func TestProblemsCapped(t *testing.T) {
	doc := `{"streams": [` + strings.Repeat(`{},`, 999) + `{}]}` // 3 problems per stream
	_, err := config.Materialize([]byte(doc), config.JSON, component.Default, secretref.Resolver{})
	ps := config.Problems(err)
	if len(ps) != config.MaxProblems+1 {
		t.Fatalf("%d problems, want %d", len(ps), config.MaxProblems+1)
	}
	if last := ps[len(ps)-1]; last.Path != "" || last.Message != "and 2900 more problems" {
		t.Errorf("last problem %+v", last)
	}
	if ps[0].Path != "streams[0].input" {
		t.Errorf("first problem %+v", ps[0])
	}
}

// TestSchemaMaxItems: the schema states the limits the validation applies.
func TestSchemaMaxItems(t *testing.T) {
	doc := config.Schema(component.Default)
	props := doc["properties"].(map[string]any)
	if got := props["streams"].(map[string]any)["maxItems"]; got != 1024 {
		t.Errorf("streams maxItems = %v", got)
	}
	defs := doc["$defs"].(map[string]any)
	pipe := defs["Pipeline"].(map[string]any)["properties"].(map[string]any)
	if got := pipe["processors"].(map[string]any)["maxItems"]; got != 256 {
		t.Errorf("processors maxItems = %v", got)
	}
}

// TestValidationMemory: validating a 1 MB document of 340,000 empty
// streams allocates a bounded multiple of its size (it allocated 2.2 GB
// and listed a million problems).
func TestValidationMemory(t *testing.T) {
	doc := []byte(`{"streams": [` + strings.Repeat(`{},`, 340000) + `{}]}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := config.Materialize(doc, config.JSON, component.Default, secretref.Resolver{})
	runtime.ReadMemStats(&after)
	if ps := config.Problems(err); len(ps) != config.MaxProblems+1 {
		t.Errorf("%d problems", len(ps))
	}
	if alloc, limit := after.TotalAlloc-before.TotalAlloc, uint64(len(doc))*150; alloc > limit {
		t.Errorf("validation allocated %d MB for a %d kB document; at most %d MB", alloc>>20, len(doc)>>10, limit>>20)
	}
}

func TestTotalProblems(t *testing.T) {
	many := make([]config.Problem, 250)
	for i := range many {
		many[i] = config.Problem{Path: fmt.Sprintf("p%d", i), Message: "m"}
	}
	for _, tt := range []struct {
		ps   []config.Problem
		want int
	}{
		{nil, 0},
		{many[:3], 3},
		{config.CapProblems(many), 250},
		{config.CapProblems(many[:101]), 101},
		{config.CapProblems(many[:100]), 100},
		{append(many[:100:100], config.Problem{Message: "and 7 more problems"}), 107},
		{append(many[:100:100], config.Problem{Path: "x", Message: "and 7 more problems"}), 101},
	} {
		if got := config.TotalProblems(tt.ps); got != tt.want {
			t.Errorf("TotalProblems(%d problems) = %d, want %d", len(tt.ps), got, tt.want)
		}
	}
}
