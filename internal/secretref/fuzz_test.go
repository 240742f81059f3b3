package secretref_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/secretref"
)

func FuzzResolve(f *testing.F) {
	for _, s := range []string{
		"", "plain", "${env:X}", "a ${env:X:-d} b ${secret:Y}", "${file:/x}", "$${env:X}", "$$${env:X}",
		"${", "${}", "${env:", "${env:}", "${env::-}", "${vault:${env:X}}", "${env:${env:X}}", "}${env:A}{",
		"${env:X:-a:-b}", "$", "$$", "${secret:", "\xff${env:\x00}",
	} {
		f.Add(s)
	}
	const value = "VALUE-\x00-${env:X}-$${"
	none := secretref.Resolver{
		LookupEnv: func(string) (string, bool) { return "", false },
		ReadFile:  func(string) ([]byte, error) { return nil, fs.ErrNotExist },
	}
	all := secretref.Resolver{
		LookupEnv: func(string) (string, bool) { return value, true },
		ReadFile:  func(string) ([]byte, error) { return []byte(value + "\n"), nil },
	}
	f.Fuzz(func(t *testing.T, s string) {
		outNone, errNone := none.String("p", s)
		outAll, errAll := all.String("p", s)

		// Every error is an *Error at the given path whose Ref is text of
		// the input and which never shows a value.
		for _, err := range []error{errNone, errAll} {
			if err == nil {
				continue
			}
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var re *secretref.Error
				if !errors.As(e, &re) {
					t.Fatalf("error %T is not *Error: %v", e, e)
				}
				if re.Path != "p" || !strings.Contains(s, re.Ref) || !strings.HasPrefix(re.Ref, "${") {
					t.Fatalf("error path %q ref %q for input %q", re.Path, re.Ref, s)
				}
				if !strings.Contains(s, "VALUE-") && strings.Contains(e.Error(), "VALUE-") {
					t.Fatalf("error shows a value: %v", e)
				}
			}
		}
		// With nothing set, resolution fails or gives output without
		// leaving a resolvable reference behind unreported.
		if errNone == nil && secretref.Contains(s) && !strings.Contains(s, ":-") {
			t.Fatalf("%q has references, none can resolve, yet no error", s)
		}
		// Text without "${" is returned as it is, whatever the environment.
		if !strings.Contains(s, "${") {
			if outNone != s || outAll != s || errNone != nil || errAll != nil {
				t.Fatalf("%q changed: %q %v / %q %v", s, outNone, errNone, outAll, errAll)
			}
		}
		// Without references the environment does not matter.
		if !secretref.Contains(s) {
			if errNone != nil || errAll != nil || outNone != outAll {
				t.Fatalf("%q without references: %q %v / %q %v", s, outNone, errNone, outAll, errAll)
			}
		}
		// Doubling every "${" escapes it: the text comes back exactly.
		esc := strings.ReplaceAll(s, "${", "$${")
		if secretref.Contains(esc) {
			t.Fatalf("escaped %q still holds a reference", esc)
		}
		if got, err := all.String("p", esc); err != nil || got != s {
			t.Fatalf("escape round trip of %q: got %q, %v", s, got, err)
		}
		// Resolve on a tree agrees with String on each string.
		tree, err := all.Resolve(map[string]any{s: []any{s, 1.0, map[string]any{"k": s}}})
		want := map[string]any{s: []any{outAll, 1.0, map[string]any{"k": outAll}}}
		if (err == nil) != (errAll == nil) || !equalTree(tree, want) {
			t.Fatalf("Resolve disagrees with String on %q: %#v, %v", s, tree, err)
		}
	})
}

func equalTree(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			if !equalTree(v, bm[k]) {
				return false
			}
		}
		return true
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !equalTree(a[i], bs[i]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}
