package strexpr

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/message"
)

// TestSQL: an expression expr-lang refuses runs as SQL over the message's
// fields; one expr-lang accepts stays expr-lang.
func TestSQL(t *testing.T) {
	m := message.New([]byte(`{"device":"lamp_1","n":3,"t":2.5,"ok":true}`))
	raw := message.New([]byte(`not json`))
	for _, tc := range []struct {
		expr string
		msg  *message.Message
		sql  bool
		want string
		err  string
	}{
		{expr: "concat('lamp:', device)", msg: &m, sql: true, want: "lamp:lamp_1"},
		{expr: "'n' || n", msg: &m, sql: true, want: "n3"},
		{expr: "device", msg: &m, sql: true, want: "lamp_1"},
		{expr: "t * 2", msg: &m, sql: true, want: "5.0"},
		{expr: "upper(device)", msg: &m, sql: true, want: "LAMP_1"},
		{expr: "cast(__value__ AS string)", msg: &raw, sql: true, want: "not json"},
		{expr: `"user:" + this.device`, msg: &m, want: "user:lamp_1"},
		{expr: "this.n", msg: &m, want: "3"},
		{expr: "nothere", msg: &m, sql: true, err: "key: SQL logic error: no such column: nothere (1)"},
		{expr: "NULL", msg: &m, sql: true, err: "key: the expression gave null"},
		{expr: "device +", err: "key.expr: "},
		{expr: "1; DROP TABLE flow", err: "as SQL: only one statement is allowed"},
	} {
		e, err := Parse("key", map[string]any{"type": "expr", "expr": tc.expr})
		var got string
		if err == nil {
			if e.SQL() != tc.sql {
				t.Errorf("%q: SQL() = %v", tc.expr, e.SQL())
			}
			got, err = e.String(tc.msg)
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one containing %q", tc.expr, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.expr, got, err, tc.want)
		}
	}
}

func TestStrings(t *testing.T) {
	msgs := []message.Message{
		message.New([]byte(`{"device":"a","n":1}`)),
		message.New([]byte(`{"device":"b","n":2.5}`)),
	}
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{"concat('lamp:', device)", []string{"lamp:a", "lamp:b"}},
		{"n", []string{"1.0", "2.5"}}, // one column: float64 over the batch
		{`"k:" + this.device`, []string{"k:a", "k:b"}},
	} {
		e, err := Parse("key", map[string]any{"type": "expr", "expr": tc.expr})
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Strings(context.Background(), msgs)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%q (-want +got)\n%s", tc.expr, d)
		}
	}
	e, _ := Parse("key", "const")
	got, err := e.Strings(context.Background(), msgs)
	if err != nil || !cmp.Equal(got, []string{"const", "const"}) {
		t.Errorf("constant: %q, %v", got, err)
	}
}
