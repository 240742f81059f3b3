package mqtt

import (
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component/componenttest"
	_ "github.com/flowplane/flowplane/internal/connect/input"
	_ "github.com/flowplane/flowplane/internal/connect/output"
)

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func TestConfig(t *testing.T) {
	base := func(extra map[string]any) map[string]any {
		c := map[string]any{"host": "127.0.0.1", "port": float64(1883), "client_id": "c"}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	tests := []struct {
		name    string
		output  bool
		conf    map[string]any
		wantErr []string // substrings; nil means it builds
	}{
		{"input minimal", false, base(map[string]any{"topics": []any{"a/b"}}), nil},
		{"input wildcards and share", false, base(map[string]any{"topics": []any{"a/+/c", "#", "$share/g/a/#"}}), nil},
		{"input no topics", false, base(map[string]any{"topics": []any{}}), []string{"topics: at least one is required"}},
		{"input bad hash", false, base(map[string]any{"topics": []any{"a/#/b"}}), []string{"topics[0]", "'#'"}},
		{"input bad plus", false, base(map[string]any{"topics": []any{"ok", "a/b+"}}), []string{"topics[1]", "'+'"}},
		{"input empty topic", false, base(map[string]any{"topics": []any{""}}), []string{"topics[0]", "empty"}},
		{"input batch size", false, base(map[string]any{"topics": []any{"a"}, "batch_size": float64(0)}), []string{"batch_size"}},
		{"qos", false, base(map[string]any{"topics": []any{"a"}, "qos": float64(3)}), []string{"qos: must be 0, 1 or 2"}},
		{"port", false, base(map[string]any{"topics": []any{"a"}, "port": float64(70000)}), []string{"port: must be in [1, 65535]"}},
		{"host missing", false, base(map[string]any{"topics": []any{"a"}, "host": ""}), []string{"host: required"}},
		{"host with scheme", false, base(map[string]any{"topics": []any{"a"}, "host": "tcp://x:1883"}), []string{"host:"}},
		{"client id missing", false, base(map[string]any{"topics": []any{"a"}, "client_id": ""}), []string{"client_id: required"}},
		{"password without user", false, base(map[string]any{"topics": []any{"a"}, "password": "p"}), []string{"password: needs a username"}},
		{"keep alive", false, base(map[string]any{"topics": []any{"a"}, "keep_alive": float64(-1)}), []string{"keep_alive"}},
		{"unknown field", false, base(map[string]any{"topics": []any{"a"}, "nope": true}), []string{"nope"}},
		{"every problem at once", false, map[string]any{"port": float64(0), "qos": float64(9)}, []string{"host", "port", "client_id", "qos", "topics"}},
		{"output static", true, base(map[string]any{"topic": "a/b", "retain": true, "qos": float64(2)}), nil},
		{"output value", true, base(map[string]any{"topic": map[string]any{"type": "value", "value": "a"}}), nil},
		{"output expr", true, base(map[string]any{"topic": map[string]any{"type": "expr", "expr": `"a/" + this.id`}}), nil},
		{"output no topic", true, base(nil), []string{"topic: required"}},
		{"output wildcard topic", true, base(map[string]any{"topic": "a/+"}), []string{"topic:", "wildcards"}},
		{"output bad expr", true, base(map[string]any{"topic": map[string]any{"type": "expr", "expr": "((("}}), []string{"topic.expr"}},
		{"output clean_session false", true, base(map[string]any{"topic": "a", "clean_session": false}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.output {
				_, err = NewOutput(tt.conf, quiet())
			} else {
				_, err = NewInput(tt.conf, quiet())
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !containsAll(err.Error(), tt.wantErr...) {
				t.Fatalf("error %v, want one holding %q", err, tt.wantErr)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	in := newInput(t, map[string]any{"host": "h", "port": float64(1), "client_id": "c", "topics": []any{"a"}})
	if *in.conf.CleanSession || in.conf.QoS != 1 || in.conf.KeepAlive != 60 || in.conf.SessionExpiry != 3600 || in.conf.BatchSize != 1 {
		t.Errorf("input defaults: %+v", in.conf)
	}
	out := newOutput(t, map[string]any{"host": "h", "port": float64(1), "client_id": "c", "topic": "a"})
	if !*out.conf.CleanSession || out.conf.QoS != 1 || out.conf.Retain {
		t.Errorf("output defaults: %+v", out.conf)
	}
}

// TestMaterializeBadConfig: what --validate tells a user, path first.
func TestMaterializeBadConfig(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"input without topics", `
streams:
  - input: {type: mqtt, host: 127.0.0.1, port: 1883, client_id: c}
    pipeline: {processors: []}
    output: {type: drop}
`, []string{"streams[0].input", "topics"}},
		{"input port not a number", `
streams:
  - input: {type: mqtt, host: 127.0.0.1, port: "1883", client_id: c, topics: [a]}
    pipeline: {processors: []}
    output: {type: drop}
`, []string{"streams[0].input", "port"}},
		{"input bad filter", `
streams:
  - input: {type: mqtt, host: 127.0.0.1, port: 1883, client_id: c, topics: ["a/#/b"]}
    pipeline: {processors: []}
    output: {type: drop}
`, []string{"streams[0].input", "topics[0]"}},
		{"output qos", `
streams:
  - input: {type: generate, context: x, count: 1}
    pipeline: {processors: []}
    output: {type: mqtt, host: 127.0.0.1, port: 1883, client_id: c, topic: a, qos: 3}
`, []string{"streams[0].output", "qos"}},
		{"output wildcard topic", `
streams:
  - input: {type: generate, context: x, count: 1}
    pipeline: {processors: []}
    output: {type: mqtt, host: 127.0.0.1, port: 1883, client_id: c, topic: {type: value, value: "a/#"}}
`, []string{"streams[0].output", "topic"}},
		{"output unknown field", `
streams:
  - input: {type: generate, context: x, count: 1}
    pipeline: {processors: []}
    output: {type: mqtt, host: 127.0.0.1, port: 1883, client_id: c, topic: a, value_field: v}
`, []string{"streams[0].output", "value_field"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := componenttest.Materialize(tt.doc)
			if err == nil || !containsAll(err.Error(), tt.want...) {
				t.Fatalf("Materialize = %v, want an error holding %q", err, tt.want)
			}
		})
	}
}

func FuzzTopicFilter(f *testing.F) {
	for _, s := range []string{"a/b", "#", "+/+", "a/#", "a/#/b", "a+", "$share/g/x", "", "\x00", "a//b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		errF := validTopicFilter(s)
		errN := validTopicName(s)
		if errN == nil && errF != nil {
			t.Fatalf("%q is a valid topic name but not a valid filter: %v", s, errF)
		}
		if errF == nil && strings.Contains(s, "#") && !strings.HasSuffix(s, "#") {
			t.Fatalf("%q accepted with # not last", s)
		}
	})
}
