package expression

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFieldReadsAreRewritten guards the fast path: reads of this.<name>
// become variables, others stay as written.
func TestFieldReadsAreRewritten(t *testing.T) {
	tests := []struct {
		src    string
		fields []string
	}{
		{`merge(this, {"w": this.v * 2})`, []string{"v"}},
		{`this.a > 1 && this["b"] == this.a`, []string{"a", "b"}},
		{`this?.a`, nil},
		{`meta.k`, nil},
	}
	for _, tt := range tests {
		p, err := Compile("expression", tt.src)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.fields, p.Fields()); diff != "" {
			t.Errorf("%s: fields (-want +got):\n%s", tt.src, diff)
		}
		if (p.Fast() != nil) != (tt.fields != nil) {
			t.Errorf("%s: fast program %v, want one only with fields", tt.src, p.Fast() != nil)
		}
	}
}

func TestEval(t *testing.T) {
	tests := []struct {
		src   string
		this  any
		meta  map[string]string
		owned bool
		want  any
		err   error
	}{
		{`this.v * 2`, map[string]any{"v": 3.0}, nil, false, 6.0, nil},
		{`this.v * 2`, 5.0, nil, false, nil, errors.New("any")}, // not an object: runs as written, expr's error
		{`this`, "s", nil, false, "s", nil},
		{`meta.k + this.s`, map[string]any{"s": "b"}, map[string]string{"k": "a"}, false, "ab", nil},
		{`merge(this, {"w": 1})`, map[string]any{"v": 1}, nil, true, map[string]any{"v": 1, "w": 1}, nil},
		{`merge(this, {"w": 1})`, nil, nil, false, map[string]any{"w": 1}, nil},
		{`merge(this, this.x)`, map[string]any{"x": 1}, nil, false, nil, ErrNotObject},
		{`this.missing`, map[string]any{}, nil, false, nil, nil},
	}
	for _, tt := range tests {
		p, err := Compile("expression", tt.src)
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		e := p.Acquire()
		got, err := p.Eval(e, tt.this, tt.meta, tt.owned)
		p.Release(e)
		switch {
		case tt.err != nil && err == nil:
			t.Errorf("%s: no error, want %v", tt.src, tt.err)
		case tt.err == nil && err != nil:
			t.Errorf("%s: %v", tt.src, err)
		case errors.Is(tt.err, ErrNotObject) && !errors.Is(err, ErrNotObject):
			t.Errorf("%s: error %v, want %v", tt.src, err, tt.err)
		case tt.err == nil:
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s: (-want +got):\n%s", tt.src, diff)
			}
		}
	}
}

// TestMergeInPlaceOnlyWhenOwned: an owned object is extended in place, one
// that others may hold is copied.
func TestMergeInPlaceOnlyWhenOwned(t *testing.T) {
	p, err := Compile("expression", `merge(this, {"w": this.v * 2})`)
	if err != nil {
		t.Fatal(err)
	}
	e := p.Acquire()
	defer p.Release(e)
	for _, owned := range []bool{false, true} {
		in := map[string]any{"v": 2.0}
		out, err := p.Eval(e, in, nil, owned)
		if err != nil {
			t.Fatal(err)
		}
		_, changed := in["w"]
		if changed != owned {
			t.Errorf("owned %v: input changed %v", owned, changed)
		}
		if diff := cmp.Diff(map[string]any{"v": 2.0, "w": 4.0}, out); diff != "" {
			t.Errorf("owned %v: (-want +got):\n%s", owned, diff)
		}
	}
}

func TestCompileErrorNamesField(t *testing.T) {
	_, err := Compile("jobs[0].operators[1].config.expression", `this.v +`)
	if err == nil {
		t.Fatal("no error")
	}
	if got := err.Error(); !strings.HasPrefix(got, "jobs[0].operators[1].config.expression: ") {
		t.Errorf("error %q does not start with the field", got)
	}
}
