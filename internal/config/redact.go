package config

import (
	"strings"

	"github.com/flowplane/flowplane/internal/secretref"
)

// redactor knows the strings that secret references resolved to, so that no
// problem message can echo one (a schema error quoting a bad value, say).
type redactor struct {
	values []string
}

// minSecretLen is the shortest resolved value scrubbed from messages; shorter
// ones would garble messages and reveal little.
const minSecretLen = 3

func newRedactor(orig, resolved any) *redactor {
	r := &redactor{}
	r.walk(orig, resolved)
	return r
}

func (r *redactor) walk(orig, resolved any) {
	switch o := orig.(type) {
	case string:
		v, _ := resolved.(string)
		if v != o && secretref.Contains(o) && len(v) >= minSecretLen {
			r.values = append(r.values, v)
		}
	case map[string]any:
		m, _ := resolved.(map[string]any)
		for k, ov := range o {
			r.walk(ov, m[k])
		}
	case []any:
		s, _ := resolved.([]any)
		for i, ov := range o {
			if i < len(s) {
				r.walk(ov, s[i])
			}
		}
	}
}

func (r *redactor) problems(ps []Problem) []Problem {
	if r == nil || len(r.values) == 0 {
		return ps
	}
	out := make([]Problem, len(ps))
	for i, p := range ps {
		for _, v := range r.values {
			p.Message = strings.ReplaceAll(p.Message, v, "[redacted]")
		}
		out[i] = p
	}
	return out
}
