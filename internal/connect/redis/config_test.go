package redis

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	_ "github.com/flowplane/flowplane/internal/connect/input"  // generate
	_ "github.com/flowplane/flowplane/internal/connect/output" // drop
	_ "github.com/flowplane/flowplane/internal/connect/processor"
	"github.com/flowplane/flowplane/internal/sandbox"
)

func TestExamples(t *testing.T) {
	res := component.Resources{StreamID: "s"}
	if _, err := NewInput(componenttest.Example(t, component.Default, component.KindInput, "redis"), res); err != nil {
		t.Errorf("input example: %v", err)
	}
	if _, err := NewOutput(componenttest.Example(t, component.Default, component.KindOutput, "redis"), res); err != nil {
		t.Errorf("output example: %v", err)
	}
	conf := componenttest.Example(t, component.Default, component.KindTemporary, "redis")
	delete(conf, "name")
	if _, err := NewTemporary(conf, res); err != nil {
		t.Errorf("temporary example: %v", err)
	}
}

func conf(t *testing.T, y string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

const url = "mode: {type: single, url: 'redis://127.0.0.1:6379'}\n"

func TestInputConfig(t *testing.T) {
	for _, tc := range []struct{ conf, err string }{
		{url + "redis_type: {type: list, list: [a, b]}", ""},
		{url + "redis_type: {type: list, list: [a], processing_suffix: ':p1'}", ""},
		{url + "redis_type: {type: subscribe, subscribe: {type: channels, channels: [a]}}", ""},
		{url + "redis_type: {type: subscribe, subscribe: {type: patterns, patterns: ['a*']}}", ""},
		{url + "redis_type: {type: streams, streams: [s], group: g, start_id: '$', claim_min_idle: 0s}", ""},
		{"mode: {type: cluster, urls: ['redis://:pw@10.0.0.1:7000', 'redis://10.0.0.2:7000']}\nredis_type: {type: list, list: [a]}", ""},
		{"mode: {type: single}\nredis_type: {type: list, list: [a]}", "mode.url: required with type single"},
		{"mode: {type: cluster}\nredis_type: {type: list, list: [a]}", "mode.urls: at least one"},
		{"mode: {type: single, url: 'redis://127.0.0.1', urls: [x]}\nredis_type: {type: list, list: [a]}", "mode.urls: only with type cluster"},
		{"mode: {type: ring, url: x}\nredis_type: {type: list, list: [a]}", "mode.type: must be single or cluster"},
		{"mode: {type: single, url: 'http://u:secret@h'}\nredis_type: {type: list, list: [a]}", "mode.url: not a redis://"},
		{url + "redis_type: {type: list}", "redis_type.list: at least one key"},
		{url + "redis_type: {type: list, list: [a], group: g}", "redis_type.group: only with type streams"},
		{url + "redis_type: {type: list, list: [a], processing_suffix: ''}", "redis_type.processing_suffix: must not be empty"},
		{url + "redis_type: {type: subscribe}", "redis_type.subscribe: required"},
		{url + "redis_type: {type: subscribe, subscribe: {type: channels}}", "redis_type.subscribe.channels: at least one"},
		{url + "redis_type: {type: subscribe, subscribe: {type: patterns, channels: [a]}}", "redis_type.subscribe.patterns: at least one"},
		{url + "redis_type: {type: subscribe, subscribe: {type: x, channels: [a]}}", "redis_type.subscribe.type: must be channels or patterns"},
		{url + "redis_type: {type: streams, streams: [s]}", "redis_type.group: required"},
		{url + "redis_type: {type: streams, group: g}", "redis_type.streams: at least one"},
		{url + "redis_type: {type: streams, streams: [s], group: g, claim_min_idle: soon}", "redis_type.claim_min_idle"},
		{url + "redis_type: {type: hashes}", "redis_type.type: must be list, subscribe or streams"},
		{url + "redis_type: {type: list, list: [a]}\nbatch_size: 0", "batch_size: must be at least 1"},
		{url + "redis_type: {type: list, list: [a]}\nbogus: 1", "unknown field"},
	} {
		_, err := NewInput(conf(t, tc.conf), component.Resources{})
		check(t, tc.conf, err, tc.err)
	}
}

func TestOutputConfig(t *testing.T) {
	for _, tc := range []struct{ conf, err string }{
		{url + "redis_type: {type: list, key: k, command: lpush}", ""},
		{url + "redis_type: {type: publish, channel: {type: value, value: c}}", ""},
		{url + "redis_type: {type: hashes, key: {type: expr, expr: 'this.id'}, field: f}", ""},
		{url + "redis_type: {type: strings, key: k, ttl: 1h}", ""},
		{url + "redis_type: {type: streams, key: k, max_len: 1000}\nvalue_field: body", ""},
		{url + "redis_type: {type: list}", "redis_type.key: required"},
		{url + "redis_type: {type: publish, key: k}", "redis_type.key: only with type list, hashes, strings or streams"},
		{url + "redis_type: {type: publish}", "redis_type.channel: required"},
		{url + "redis_type: {type: hashes, key: k}", "redis_type.field: required"},
		{url + "redis_type: {type: strings, key: k, ttl: forever}", "redis_type.ttl"},
		{url + "redis_type: {type: list, key: k, ttl: 1s}", "redis_type.ttl: only with type strings"},
		{url + "redis_type: {type: list, key: k, command: lset}", "redis_type.command: must be rpush or lpush"},
		{url + "redis_type: {type: streams, key: k, max_len: -1}", "redis_type.max_len: must not be negative"},
		{url + "redis_type: {type: strings, key: {type: expr, expr: 'this.'}}", "redis_type.key.expr"},
		{url + "redis_type: {type: subscribe}", "redis_type.type: must be list, publish"},
	} {
		_, err := NewOutput(conf(t, tc.conf), component.Resources{})
		check(t, tc.conf, err, tc.err)
	}
}

func TestTemporaryConfig(t *testing.T) {
	for _, tc := range []struct{ conf, err string }{
		{url + "redis_type: {type: string}\ncodec: {type: json}", ""},
		{url + "redis_type: {type: list}\ncodec: {type: json}", ""},
		{url + "redis_type: {type: hash}\ncodec: {type: json}", "redis_type.type: must be string or list"},
		{url + "redis_type: {type: list}\ncodec: {type: csv}", "codec.type: must be json"},
		{url + "redis_type: {type: list}", "codec.type: required"},
	} {
		_, err := NewTemporary(conf(t, tc.conf), component.Resources{})
		check(t, tc.conf, err, tc.err)
	}
}

func check(t *testing.T, conf string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s:\nunexpected error %v", conf, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s:\nerror %v, want one containing %q", conf, err, want)
	case err != nil && strings.Contains(err.Error(), "secret"):
		t.Errorf("%s:\nerror %v repeats the password", conf, err)
	}
}

// TestMaterializeBadConfig checks the path-named errors of --validate.
func TestMaterializeBadConfig(t *testing.T) {
	for _, tc := range []struct{ input, output, err string }{
		{"type: redis\nredis_type: {type: list, list: [a]}", "type: drop",
			"streams[0].input"},
		{"type: redis\n" + url + "redis_type: {type: list, lists: [a]}", "type: drop",
			"streams[0].input.redis_type"},
		{"type: redis\n" + url + "redis_type: {type: queue, list: [a]}", "type: drop",
			"streams[0].input.redis_type.type"},
		{"type: redis\n" + url + "redis_type: {type: streams, streams: [s]}", "type: drop",
			"redis_type.group: required"},
		{"type: generate\ncontext: '{}'\ncount: 1", "type: redis\n" + url + "redis_type: {type: strings, key: 7}",
			"streams[0].output.redis_type.key"},
		{"type: generate\ncontext: '{}'\ncount: 1", "type: redis\nmode: {type: single, url: 5}\nredis_type: {type: list, key: k}",
			"streams[0].output.mode.url"},
	} {
		_, err := componenttest.Materialize(streamDoc(tc.input, tc.output))
		t.Logf("%v", err)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s / %s: error %v, want one containing %q", tc.input, tc.output, err, tc.err)
		}
	}
	doc := streamDoc("type: generate\ncontext: '{}'\ncount: 1", "type: drop") +
		"    temporary:\n      - {name: t, type: redis, " + strings.TrimSuffix(url, "\n") + ", redis_type: {type: set}, codec: {type: json}}\n"
	if _, err := componenttest.Materialize(doc); err == nil || !strings.Contains(err.Error(), "temporary[0]") {
		t.Errorf("temporary with a bad redis_type: error %v, want one naming temporary[0]", err)
	}
}

// FuzzParseMode: any URL is either accepted or rejected with an error that
// names the field and never repeats the URL's password.
func FuzzParseMode(f *testing.F) {
	for _, u := range []string{"redis://127.0.0.1:6379", "rediss://u:pw@h:1/2?dial_timeout=1s", "redis://:%zz@h", "http://x", "", "redis://h?bogus=1"} {
		f.Add("single", u)
		f.Add("cluster", u)
	}
	f.Fuzz(func(t *testing.T, typ, u string) {
		m := ModeConfig{Type: typ, URL: u}
		if typ == "cluster" {
			m = ModeConfig{Type: typ, URLs: []string{u}}
		}
		_, err := parseMode(m, sandbox.Net{})
		if err == nil {
			return
		}
		if !strings.HasPrefix(err.Error(), "mode.") {
			t.Errorf("error %q does not name the field", err)
		}
		if i := strings.Index(u, ":pw@"); i >= 0 && strings.Contains(err.Error(), ":pw@") {
			t.Errorf("error %q repeats the password", err)
		}
	})
}
