package job_test

import (
	"fmt"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
)

// BenchmarkBuild plans a job at the configuration's limits: 1024 operators
// (256 routed sources, windows, maps, sinks) and about 4096 edges.
func BenchmarkBuild(b *testing.B) {
	j := config.Job{ID: "big", Version: 1, Parallelism: 2, MaxParallelism: 128}
	tm := &config.Time{Mode: "event_time", TimestampField: "ts", LateEventPolicy: "route", LateEventRoute: "late"}
	j.Operators = append(j.Operators, config.Operator{ID: "late", Kind: "sink"})
	j.Sinks = append(j.Sinks, config.Sink{OperatorID: "late", OutputType: "drop"})
	for s := range 255 {
		src, m, w, out := fmt.Sprint("s", s), fmt.Sprint("m", s), fmt.Sprint("w", s), fmt.Sprint("o", s)
		j.Operators = append(j.Operators,
			config.Operator{ID: src, Kind: "source"},
			config.Operator{ID: m, Kind: "map", Config: map[string]any{"expression": "this"}},
			config.Operator{ID: w, Kind: "window", Config: map[string]any{"key": "this.k", "window": map[string]any{"type": "tumbling", "size_ms": 1000.0}}},
			config.Operator{ID: out, Kind: "sink"})
		j.Sources = append(j.Sources, config.Source{OperatorID: src, InputType: "memory", Time: tm})
		j.Sinks = append(j.Sinks, config.Sink{OperatorID: out, OutputType: "drop"})
		j.Edges = append(j.Edges, config.Edge{From: src, To: m}, config.Edge{From: m, To: w, Partitioned: true}, config.Edge{From: w, To: out})
		if s > 0 {
			j.Edges = append(j.Edges, config.Edge{From: fmt.Sprint("m", s-1), To: w, Partitioned: true})
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, ps := job.Build("jobs[0]", j); len(ps) > 0 {
			b.Fatal(ps[0])
		}
	}
}
