package testsuite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/expression"
	"github.com/flowplane/flowplane/internal/message"
)

// Got is one message an output received, or one record a sink committed.
type Got struct {
	Payload []byte
	Value   any // the payload as JSON; nil when it is not JSON
	IsJSON  bool
	Meta    map[string]string
}

func gotOf(m *message.Message) Got {
	p, err := m.Payload()
	if err != nil {
		p = []byte(fmt.Sprintf("<payload: %v>", err))
	}
	g := Got{Payload: bytes.Clone(p), Meta: m.Meta.Fields}
	var v any
	if json.Unmarshal(p, &v) == nil {
		g.Value, g.IsJSON = v, true
	}
	return g
}

func (g Got) String() string {
	s := string(g.Payload)
	if len(g.Meta) > 0 {
		s += " meta " + string(canonical(g.Meta))
	}
	return s
}

// compileExpr compiles a matcher's expression with the processors'
// language: `this` is the value, `meta` the metadata fields.
func compileExpr(src string) (*expression.Program, error) {
	return expression.Compile("expr", src)
}

// match reports whether g satisfies m, and otherwise why, as a diff.
func match(m Matcher, g Got) (bool, string) {
	var why []string
	if m.Payload != nil && *m.Payload != string(g.Payload) {
		why = append(why, "payload (-want +got):\n"+diff(*m.Payload, string(g.Payload)))
	}
	if m.HasJSON {
		if !g.IsJSON {
			why = append(why, fmt.Sprintf("json: the payload is not JSON: %q", g.Payload))
		} else if !cmp.Equal(m.JSON, g.Value) {
			why = append(why, "json (-want +got):\n"+diff(m.JSON, g.Value))
		}
	}
	if m.Subset != nil {
		if !g.IsJSON {
			why = append(why, fmt.Sprintf("subset: the payload is not JSON: %q", g.Payload))
		} else if p := project(m.Subset, g.Value); !cmp.Equal(m.Subset, p) {
			why = append(why, "subset (-want +got, fields the want does not name left out):\n"+diff(m.Subset, p))
		}
	}
	if m.Expr != "" {
		if ok, err := holds(m.Expr, g); err != nil {
			why = append(why, fmt.Sprintf("expr %q: %v", m.Expr, err))
		} else if !ok {
			why = append(why, fmt.Sprintf("expr %q is false for %s", m.Expr, g))
		}
	}
	for k, want := range m.Metadata {
		if got, ok := g.Meta[k]; !ok || got != want {
			why = append(why, fmt.Sprintf("metadata %s: want %q, got %s", k, want, quoteOrMissing(got, ok)))
		}
	}
	if m.Error != "" {
		got, ok := g.Meta[message.MetaError]
		if !ok || !strings.Contains(got, m.Error) {
			why = append(why, fmt.Sprintf("error: want one containing %q, got %s", m.Error, quoteOrMissing(got, ok)))
		}
	}
	return len(why) == 0, strings.Join(why, "\n")
}

func quoteOrMissing(s string, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprintf("%q", s)
}

func holds(src string, g Got) (bool, error) {
	p, err := compileExpr(src)
	if err != nil {
		return false, err
	}
	e := p.Acquire()
	defer p.Release(e)
	var this any = string(g.Payload)
	if g.IsJSON {
		this = g.Value
	}
	v, err := p.Eval(e, this, g.Meta, false)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("gave %s, not a boolean", shortJSON(v))
	}
	return b, nil
}

// project is got cut down to the shape of want: the fields of objects
// that want names, the items of lists up to want's length. want is a JSON
// subset of got exactly when project(want, got) equals want.
func project(want, got any) any {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return got
		}
		out := make(map[string]any, len(w))
		for k, wv := range w {
			if gv, ok := g[k]; ok {
				out[k] = project(wv, gv)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return got
		}
		out := make([]any, len(g))
		for i := range g {
			out[i] = project(w[i], g[i])
		}
		return out
	}
	return got
}

// compareOrdered checks got against want item by item, in order.
func compareOrdered(what string, want []Matcher, got []Got) []string {
	var fails []string
	for i := 0; i < max(len(want), len(got)); i++ {
		switch {
		case i >= len(got):
			fails = append(fails, fmt.Sprintf("%s[%d]: missing (%s)", what, i, want[i].Path))
		case i >= len(want):
			fails = append(fails, fmt.Sprintf("%s[%d]: unexpected %s", what, i, got[i]))
		default:
			if ok, why := match(want[i], got[i]); !ok {
				fails = append(fails, fmt.Sprintf("%s[%d] (%s):\n%s", what, i, want[i].Path, why))
			}
		}
	}
	if len(want) != len(got) {
		fails = append(fails, fmt.Sprintf("%s: want %d messages, got %d:\n%s", what, len(want), len(got), listGot(got)))
	}
	return fails
}

// compareUnordered checks that got holds one item for each matcher of
// want and nothing else, in any order: the records of a sink come from
// several subtasks, whose order is not defined. A duplicate is an item
// too many.
func compareUnordered(what string, want []Matcher, got []Got) []string {
	got = sortedGot(got)
	used := make([]bool, len(got))
	var fails []string
	for _, w := range want {
		found := false
		for j := range got {
			if !used[j] {
				if ok, _ := match(w, got[j]); ok {
					used[j], found = true, true
					break
				}
			}
		}
		if !found {
			fails = append(fails, fmt.Sprintf("%s: no record matches %s: %s", what, w.Path, describe(w)))
		}
	}
	for j, u := range used {
		if !u {
			fails = append(fails, fmt.Sprintf("%s: unexpected %s", what, got[j]))
		}
	}
	if len(fails) > 0 {
		fails = append(fails, fmt.Sprintf("%s: want %d records, got %d (sorted):\n%s", what, len(want), len(got), listGot(got)))
	}
	return fails
}

func sortedGot(got []Got) []Got {
	out := append([]Got(nil), got...)
	sort.SliceStable(out, func(i, j int) bool { return bytes.Compare(out[i].canonical(), out[j].canonical()) < 0 })
	return out
}

func (g Got) canonical() []byte {
	if g.IsJSON {
		return canonical(g.Value)
	}
	return g.Payload
}

func listGot(got []Got) string {
	if len(got) == 0 {
		return "(nothing)"
	}
	var b strings.Builder
	for i, g := range got {
		fmt.Fprintf(&b, "%d: %s\n", i, g)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// describe is a matcher as written.
func describe(m Matcher) string {
	var parts []string
	if m.Payload != nil {
		parts = append(parts, fmt.Sprintf("payload %q", *m.Payload))
	}
	if m.HasJSON {
		parts = append(parts, "json "+shortJSON(m.JSON))
	}
	if m.Subset != nil {
		parts = append(parts, "subset "+shortJSON(m.Subset))
	}
	if m.Expr != "" {
		parts = append(parts, fmt.Sprintf("expr %q", m.Expr))
	}
	if m.Metadata != nil {
		parts = append(parts, "metadata "+shortJSON(m.Metadata))
	}
	if m.Error != "" {
		parts = append(parts, fmt.Sprintf("error %q", m.Error))
	}
	return strings.Join(parts, ", ")
}

// diff is go-cmp's diff without its trailing newline.
func diff(want, got any) string {
	return strings.TrimRight(cmp.Diff(want, got), "\n")
}

// canonical is v as JSON with sorted keys (encoding/json sorts map keys).
func canonical(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprintf("%v", v))
	}
	return b
}

func shortJSON(v any) string {
	s := string(canonical(v))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
