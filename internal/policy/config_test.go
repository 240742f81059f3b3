package policy

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/config"
)

// TestConfig: the files and destinations of a materialized configuration
// are found by field, at any depth, and each refusal names its path and
// rule; URL paths and listen addresses are not files or destinations.
func TestConfig(t *testing.T) {
	root := t.TempDir()
	in := filepath.Join(root, "in.jsonl")
	p := Default(root).WithLookup(func(context.Context, string) ([]netip.Addr, error) {
		return nil, errors.New("no lookups here")
	})
	comp := func(typ string, fields map[string]any) config.Component {
		return config.Component{Type: typ, Fields: fields}
	}
	cfg := &config.Config{
		Logging: config.Logging{FilePath: "/var/log/flowplane.log"},
		Streams: []config.Stream{{
			Input: comp("http", map[string]any{"address": "0.0.0.0:8080", "path": "/ingest",
				"tls": map[string]any{"cert_file": "/etc/ssl/private/key.pem"}}),
			Pipeline: config.Pipeline{Processors: []config.Component{
				comp("protobuf", map[string]any{"proto_inputs": []any{in, "/etc/protos"}}),
				comp("udf", map[string]any{"module": "/usr/lib/evil.wasm"}),
			}},
			Output:     comp("file", map[string]any{"path": filepath.Join(root, "out.jsonl")}),
			Durability: &config.Durability{Path: "/var/wal", Backend: &config.WALBackend{URL: "file:///srv/wal"}},
		}},
		Jobs: []config.Job{{
			Sources: []config.Source{{InputType: "sql", Config: map[string]any{
				"input_type": map[string]any{"type": "sqlite", "path": "/var/lib/hub.db"}}}},
			Sinks: []config.Sink{
				{OutputType: "http", Config: map[string]any{"url": "http://169.254.169.254/latest/"}},
				{OutputType: "object_store", Config: map[string]any{"url": "file://" + root + "/objects", "path": "{{date}}/x"}},
			},
			Operators:  []config.Operator{{Kind: "map", Config: map[string]any{"expression": "this"}}},
			State:      &config.JobState{Root: "/etc"},
			Checkpoint: &config.Checkpoint{ObjectStoreURI: "s3://bucket?endpoint=http://[fe80::1]:9000"},
		}},
	}
	var got []string
	for _, d := range p.Config(context.Background(), cfg) {
		got = append(got, d.Path+" "+d.Rule)
	}
	want := []string{
		"logging.file_path " + RuleFileRoots,
		"streams[0].input.tls.cert_file " + RuleFileRoots,
		"streams[0].pipeline.processors[0].proto_inputs[1] " + RuleFileRoots,
		"streams[0].pipeline.processors[1].module " + RuleFileRoots,
		"streams[0].durability.path " + RuleFileRoots,
		"streams[0].durability.backend.url " + RuleFileRoots,
		"jobs[0].sources[0].config.input_type.path " + RuleFileRoots,
		"jobs[0].sinks[0].config.url " + RuleOutbound,
		"jobs[0].state.root " + RuleFileRoots,
		"jobs[0].checkpoint.object_store_uri " + RuleOutbound,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("denials (-want +got):\n%s", d)
	}
}
