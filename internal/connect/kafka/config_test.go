package kafka

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
)

// TestBadConfig: --validate names the path of the bad field (schema
// problems; the constructors' checks are in TestInputConfig and
// TestOutputConfig).
func TestBadConfig(t *testing.T) {
	const good = `brokers: ["127.0.0.1:9092"]`
	for _, tc := range []struct{ in, out, want string }{
		{in: `topics: [a]`, out: good + "\n      topic: x", want: "streams[0].input"},
		{in: good + "\n      topics: a", out: good + "\n      topic: x", want: "streams[0].input.topics"},
		{in: good + "\n      topics: [a]\n      bogus: 1", out: good + "\n      topic: x", want: "streams[0].input"},
		{in: good + "\n      topics: [a]", out: good + "\n      topic: x\n      compression: brotli", want: "streams[0].output.compression"},
		{in: good + "\n      topics: [a]", out: good + "\n      topic: x\n      acks: 2", want: "streams[0].output.acks"},
		{in: good + "\n      topics: [a]", out: good, want: "streams[0].output"},
	} {
		doc := fmt.Sprintf("streams:\n  - id: s\n    input:\n      type: kafka\n      %s\n    pipeline:\n      processors: []\n    output:\n      type: kafka\n      %s\n", tc.in, tc.out)
		_, err := componenttest.Materialize(doc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n%s: error %v, want one containing %q", tc.in, tc.out, err, tc.want)
		}
	}
}

func TestInputConfig(t *testing.T) {
	for _, tc := range []struct {
		conf map[string]any
		want string // "" for valid
	}{
		{map[string]any{"brokers": []any{"h:1"}, "topics": []any{"a"}}, ""},
		{map[string]any{"brokers": []any{"h:1"}, "topics": []any{"a"}, "partitions": []any{0, 2}}, ""},
		{map[string]any{"brokers": []any{}, "topics": []any{"a"}}, "brokers: at least one is required"},
		{map[string]any{"brokers": []any{"nohost"}, "topics": []any{"a"}}, `brokers[0]: "nohost" is not host:port`},
		{map[string]any{"brokers": []any{"h:1"}}, "topics: at least one is required"},
		{map[string]any{"brokers": []any{"h:1"}, "topics": []any{""}}, "topics[0]: empty"},
		{map[string]any{"brokers": []any{"h:1"}, "topics": []any{"a"}, "batch_size": 0}, "batch_size: must be at least 1"},
		{map[string]any{"brokers": []any{"h:1"}, "topics": []any{"a"}, "partitions": []any{-1}}, "partitions[0]: -1 is negative"},
		{map[string]any{"brokers": []any{"h:1"}, "topics": []any{"a"}, "connect_timeout": "x"}, "connect_timeout:"},
		{map[string]any{"brokers": []any{"h:1"}, "topics": []any{"a"}, "consumer_group": "g", "partitions": []any{0}}, "partitions: cannot be combined"},
	} {
		_, err := NewInput(tc.conf, component.Resources{})
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: error %v, want %q", tc.conf, err, tc.want)
		}
	}
}

func TestOutputConfig(t *testing.T) {
	base := func(kv ...any) map[string]any {
		m := map[string]any{"brokers": []any{"h:1"}, "topic": "t"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		conf map[string]any
		want string
	}{
		{base(), ""},
		{base("acks", 1), ""},
		{base("acks", "0", "compression", "zstd"), ""},
		{base("partition", "3", "key", map[string]any{"type": "expr", "expr": "this.id"}), ""},
		{base("topic", ""), "topic: empty"},
		{base("acks", "2"), "acks: 2 is not one of"},
		{base("compression", "x"), "compression:"},
		{base("partition", "p"), `partition: "p" is not a partition number`},
		{base("acks", "1", "idempotent", true), "idempotent:"},
		{base("transaction_timeout", "10ms"), "transaction_timeout:"},
		{base("exactly_once", true, "transactional_id", "fp"), ""},
		{base("exactly_once", true, "acks", "1"), "exactly_once: transactions need acks all, not 1"},
		{base("exactly_once", true, "idempotent", false), "exactly_once: transactions need the idempotent producer; remove idempotent: false"},
		{base("key", map[string]any{"type": "nope"}), "key.type:"},
		{base("topic", map[string]any{"type": "expr", "expr": "this."}), "topic.expr"},
	} {
		_, err := NewOutput(tc.conf, component.Resources{})
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: error %v, want %q", tc.conf, err, tc.want)
		}
	}
}

func FuzzPosition(f *testing.F) {
	f.Add([]byte(`{"in":{"0":5,"3":7}}`))
	f.Add([]byte(`{"in":{"x":1}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		pos, err := parsePosition(raw)
		if err != nil {
			return
		}
		for tp, o := range pos {
			if tp.Partition < 0 || o < 0 {
				t.Fatalf("accepted %v=%d", tp, o)
			}
		}
	})
}
