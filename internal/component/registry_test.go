package component

import (
	"errors"
	"strings"
	"testing"
)

// TestUnknownError checks the message of an unregistered name: a likely
// typo gets a suggestion, and a name flowplane cannot offer (ArkFlow's vrl
// and python processors) says why and names the alternative.
func TestUnknownError(t *testing.T) {
	r := NewRegistry()
	noop := func(map[string]any, Resources) (Processor, error) { return nil, nil }
	for _, n := range []string{"mapping", "filter", "json"} {
		r.RegisterProcessor(Spec{Name: n}, noop)
	}
	tests := []struct {
		kind Kind
		name string
		want []string // substrings, in order
		not  []string
	}{
		{KindProcessor, "vrl", []string{`unknown processor "vrl": `, "cannot run in flowplane", "mapping", "expr-lang"}, []string{"did you mean"}},
		{KindProcessor, "python", []string{`unknown processor "python": `, "cannot run in flowplane", "mapping", "filter", "udf operator", "docs/jobs.md"}, []string{"did you mean"}},
		{KindProcessor, "maping", []string{`unknown processor "maping"; did you mean "mapping"?`}, []string{"cannot run"}},
		{KindProcessor, "json_to_arrow", []string{`unknown processor "json_to_arrow"`}, []string{"cannot run", "did you mean"}},
		// Only processors are known to be unavailable: an input named vrl is merely unknown.
		{KindInput, "vrl", []string{`unknown input "vrl"`}, []string{"cannot run"}},
	}
	for _, tc := range tests {
		t.Run(string(tc.kind)+"/"+tc.name, func(t *testing.T) {
			var err error
			switch tc.kind {
			case KindProcessor:
				_, err = r.NewProcessor(tc.name, nil, Resources{})
			case KindInput:
				_, err = r.NewInput(tc.name, nil, Resources{})
			}
			var u *UnknownError
			if !errors.As(err, &u) {
				t.Fatalf("got %v, want an *UnknownError", err)
			}
			msg := err.Error()
			rest := msg
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("message %q lacks %q (in order)", msg, w)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range tc.not {
				if strings.Contains(msg, n) {
					t.Errorf("message %q should not contain %q", msg, n)
				}
			}
		})
	}
}
