package strexpr

import (
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/message"
)

func TestString(t *testing.T) {
	m := message.New([]byte(`{"user":"u7","n":3,"ok":true}`))
	m.SetMeta("topic", "t1")
	for _, tc := range []struct {
		conf any
		want string
		err  string
	}{
		{conf: "orders", want: "orders"},
		{conf: map[string]any{"type": "value", "value": "k"}, want: "k"},
		{conf: map[string]any{"type": "expr", "expr": "this.user"}, want: "u7"},
		{conf: map[string]any{"type": "expr", "expr": "this.n"}, want: "3"},
		{conf: map[string]any{"type": "expr", "expr": "this.ok"}, want: "true"},
		{conf: map[string]any{"type": "expr", "expr": `"user:" + this.user`}, want: "user:u7"},
		{conf: map[string]any{"type": "expr", "expr": `meta.topic`}, want: "t1"},
		{conf: map[string]any{"type": "expr", "expr": "this.missing"}, err: "key: the expression gave null"},
		{conf: map[string]any{"type": "expr", "expr": "this.user +"}, err: "key.expr:"},
		{conf: map[string]any{"type": "expr"}, err: "key.expr: an expression is required"},
		{conf: map[string]any{"type": "value"}, err: "key.value: a string is required"},
		{conf: map[string]any{"type": "other"}, err: "key.type: must be value or expr"},
		{conf: nil, err: "key: required"},
		{conf: 7, err: "key: must be a string"},
	} {
		e, err := Parse("key", tc.conf)
		var got string
		if err == nil {
			got, err = e.String(&m)
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want one containing %q", tc.conf, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %q, %v; want %q", tc.conf, got, err, tc.want)
		}
	}
}

func TestStatic(t *testing.T) {
	e, _ := Parse("k", "abc")
	if v, ok := e.Static(); !ok || v != "abc" {
		t.Errorf("Static: %q %v", v, ok)
	}
	e, _ = Parse("k", map[string]any{"type": "expr", "expr": "this.a"})
	if _, ok := e.Static(); ok {
		t.Error("an expression is not static")
	}
}
