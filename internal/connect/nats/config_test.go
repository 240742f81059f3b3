package nats_test

import (
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/connect/nats"
)

func TestExamplesBuild(t *testing.T) {
	in := componenttest.Example(t, component.Default, component.KindInput, "nats")
	if _, err := nats.NewInput(in, component.Resources{Logger: nil}); err != nil {
		t.Errorf("input example: %v", err)
	}
	out := componenttest.Example(t, component.Default, component.KindOutput, "nats")
	if _, err := nats.NewOutput(out, component.Resources{}); err != nil {
		t.Errorf("output example: %v", err)
	}
}

func TestInputConfig(t *testing.T) {
	regular := map[string]any{"type": "regular", "subject": "a.>"}
	js := map[string]any{"type": "jet_stream", "stream": "S", "consumer_name": "c"}
	with := func(base map[string]any, kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name string
		conf map[string]any
		err  string // "" for a good configuration
	}{
		{"regular", map[string]any{"url": "nats://127.0.0.1:4222", "mode": regular}, ""},
		{"regular queue", map[string]any{"url": "127.0.0.1:4222", "mode": with(regular, "queue_group", "g")}, ""},
		{"jetstream", map[string]any{"url": "nats://a:1,nats://b:2", "mode": js, "batch_size": 10, "max_wait": "250ms"}, ""},
		{"jetstream alias durable", map[string]any{"url": "nats://a:1",
			"mode": map[string]any{"type": "jetstream", "stream": "S", "durable_name": "d"}}, ""},
		{"token", map[string]any{"url": "nats://a:1", "mode": regular, "auth": map[string]any{"token": "t"}}, ""},
		{"user pass", map[string]any{"url": "nats://a:1", "mode": regular,
			"auth": map[string]any{"username": "u", "password": "p"}}, ""},
		{"no url", map[string]any{"mode": regular}, "url: required"},
		{"bad scheme", map[string]any{"url": "http://u:secret@a:1", "mode": regular}, `url: scheme "http"`},
		{"bad mode", map[string]any{"url": "nats://a:1", "mode": map[string]any{"type": "push"}}, "mode.type: must be regular or jet_stream"},
		{"regular no subject", map[string]any{"url": "nats://a:1", "mode": map[string]any{"type": "regular"}}, "mode.subject: required"},
		{"regular with stream", map[string]any{"url": "nats://a:1", "mode": with(regular, "stream", "S")}, "mode.stream: only with type jet_stream"},
		{"js no stream", map[string]any{"url": "nats://a:1", "mode": map[string]any{"type": "jet_stream", "consumer_name": "c"}}, "mode.stream: required"},
		{"js no consumer", map[string]any{"url": "nats://a:1", "mode": map[string]any{"type": "jet_stream", "stream": "S"}}, "mode.consumer_name: required"},
		{"js subject", map[string]any{"url": "nats://a:1", "mode": with(js, "subject", "x")}, "mode.subject: only with type regular"},
		{"js deliver", map[string]any{"url": "nats://a:1", "mode": with(js, "deliver", "first")}, "mode.deliver"},
		{"js ack wait", map[string]any{"url": "nats://a:1", "mode": with(js, "ack_wait", "soon")}, "mode.ack_wait"},
		{"batch size", map[string]any{"url": "nats://a:1", "mode": regular, "batch_size": 0}, "batch_size: must be at least 1"},
		{"max wait", map[string]any{"url": "nats://a:1", "mode": regular, "max_wait": "0s"}, "max_wait: must be a positive duration"},
		{"half auth", map[string]any{"url": "nats://a:1", "mode": regular, "auth": map[string]any{"username": "u"}}, "auth: username and password go together"},
		{"unknown field", map[string]any{"url": "nats://a:1", "mode": regular, "subject": "x"}, "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := nats.NewInput(tc.conf, component.Resources{})
			check(t, err, tc.err)
		})
	}
}

func TestOutputConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf map[string]any
		err  string
	}{
		{"regular", map[string]any{"url": "nats://a:1", "mode": map[string]any{"type": "regular", "subject": "a.b"}}, ""},
		{"expr", map[string]any{"url": "nats://a:1", "mode": map[string]any{"type": "regular",
			"subject": map[string]any{"type": "expr", "expr": `"a." + this.k`}}}, ""},
		{"jetstream msg id", map[string]any{"url": "nats://a:1", "mode": map[string]any{"type": "jet_stream",
			"subject": map[string]any{"type": "value", "value": "a"}, "msg_id": map[string]any{"type": "expr", "expr": "this.id"}},
			"headers": map[string]any{"X": "y"}, "metadata_headers": true, "timeout": "1s", "value_field": "v"}, ""},
		{"no subject", map[string]any{"url": "nats://a:1", "mode": map[string]any{"type": "regular"}}, "mode.subject: required"},
		{"wildcard subject", map[string]any{"url": "nats://a:1", "mode": map[string]any{"type": "regular", "subject": "a.*"}}, "mode.subject: \"a.*\" is not a valid subject"},
		{"empty token", map[string]any{"url": "nats://a:1", "mode": map[string]any{"type": "regular", "subject": "a..b"}}, "is not a valid subject"},
		{"bad expr", map[string]any{"url": "nats://a:1", "mode": map[string]any{"type": "regular",
			"subject": map[string]any{"type": "expr", "expr": "this.k +"}}}, "mode.subject.expr"},
		{"msg id on core", map[string]any{"url": "nats://a:1", "mode": map[string]any{"type": "regular", "subject": "a", "msg_id": "x"}}, "mode.msg_id: only with type jet_stream"},
		{"timeout", map[string]any{"url": "nats://a:1", "mode": map[string]any{"type": "regular", "subject": "a"}, "timeout": "-1s"}, "timeout: must be a positive"},
		{"no url", map[string]any{"mode": map[string]any{"type": "regular", "subject": "a"}}, "url: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := nats.NewOutput(tc.conf, component.Resources{})
			check(t, err, tc.err)
		})
	}
}

func check(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("unexpected error: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("error %v, want one containing %q", err, want)
	}
	if err != nil && strings.Contains(err.Error(), "secret") {
		t.Errorf("error quotes a credential: %v", err)
	}
}

// TestMaterializeNamesThePath: a configuration the schema rejects gets an
// error naming the path of the bad field, as `flowplane --validate` shows.
func TestMaterializeNamesThePath(t *testing.T) {
	for _, tc := range []struct{ name, input, output, want string }{
		{"unknown input field", `{type: nats, url: "nats://127.0.0.1:1", mode: {type: regular, subject: a}, topic: x}`,
			`{type: drop}`, "streams[0].input"},
		{"bad input mode type", `{type: nats, url: "nats://127.0.0.1:1", mode: {type: push, subject: a}}`,
			`{type: drop}`, "streams[0].input.mode"},
		{"batch size type", `{type: nats, url: "nats://127.0.0.1:1", mode: {type: regular, subject: a}, batch_size: many}`,
			`{type: drop}`, "streams[0].input.batch_size"},
		{"output missing subject", `{type: memory, messages: []}`,
			`{type: nats, url: "nats://127.0.0.1:1", mode: {type: jet_stream}}`, "streams[0].output.mode"},
		{"output msg id on core", `{type: memory, messages: []}`,
			`{type: nats, url: "nats://127.0.0.1:1", mode: {type: regular, subject: a, msg_id: x}}`, "mode.msg_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "streams:\n  - id: s\n    input: " + tc.input + "\n    pipeline: {processors: []}\n    output: " + tc.output + "\n"
			_, err := componenttest.Materialize(doc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}
