package secretref_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/secretref"
)

// treeOf decodes JSON the way configuration trees are decoded.
func treeOf(t *testing.T, doc string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestResolveTree(t *testing.T) {
	fx := newFixture(t)
	fileJSON, _ := json.Marshal("${file:" + fx.files["nlnl"] + "}")
	tests := []struct {
		name string
		in   any
		want any
		errs []wantErr
	}{
		{name: "nil", in: nil, want: nil},
		{name: "top-level string has empty path", in: "${env:NOPE}", want: "${env:NOPE}", errs: []wantErr{
			{"", "${env:NOPE}", secretref.ErrUnset, "NOPE is not set"},
		}},
		{name: "scalars untouched", in: treeOf(t, `[1.5, true, null, "x", 0]`), want: []any{1.5, true, nil, "x", 0.0}},
		{name: "go scalars untouched", in: []any{1, int64(2), uint8(3), float32(4)}, want: []any{1, int64(2), uint8(3), float32(4)}},
		{name: "keys untouched", in: treeOf(t, `{"${env:TOKEN}": "${env:TOKEN}", "$${x}": {"${secret:DB}": 1}}`),
			want: map[string]any{"${env:TOKEN}": tokenValue, "$${x}": map[string]any{"${secret:DB}": 1.0}}},
		{name: "nested maps and arrays", in: treeOf(t, `{
			"logging": {"level": "${env:NOPE:-info}"},
			"streams": [
				{"input": {"type": "http", "address": "127.0.0.1:${env:NOPE:-8080}"},
				 "output": {"headers": {"Authorization": "Bearer ${secret:DB}"}, "token": `+string(fileJSON)+`}},
				{"pipeline": {"processors": [{"expression": "$${env:X} == ${env:TOKEN}", "n": 3}]}}
			],
			"list": [["${env:TOKEN}", ["$${y}"]]]}`),
			want: map[string]any{
				"logging": map[string]any{"level": "info"},
				"streams": []any{
					map[string]any{
						"input":  map[string]any{"type": "http", "address": "127.0.0.1:8080"},
						"output": map[string]any{"headers": map[string]any{"Authorization": "Bearer " + secretValue}, "token": fileValue},
					},
					map[string]any{"pipeline": map[string]any{"processors": []any{
						map[string]any{"expression": "${env:X} == " + tokenValue, "n": 3.0},
					}}},
				},
				"list": []any{[]any{tokenValue, []any{"${y}"}}},
			}},
		{name: "typed string containers", in: map[string]any{"h": map[string]string{"a": "${env:TOKEN}"}, "l": []string{"x", "${secret:DB}"}},
			want: map[string]any{"h": map[string]string{"a": tokenValue}, "l": []string{"x", secretValue}}},
		{name: "empty containers", in: treeOf(t, `{"m": {}, "a": []}`), want: map[string]any{"m": map[string]any{}, "a": []any{}}},
		{name: "every failure with its path, keys sorted", in: treeOf(t, `{
			"streams": [
				{"output": {"token": "${env:TOKEN}"}},
				{"pipeline": {"processors": [{"expression": "${env:A} ${secret:B}"}]},
				 "input": {"address": "${file:`+fx.files["missing"]+`}"}}
			],
			"health_check": {"node_token": "${env:}", "hub_urls": ["ok", "${secret:DB}", "${env:C}"]},
			"logging": "${env:D:-debug}"}`),
			errs: []wantErr{
				{"health_check.hub_urls[2]", "${env:C}", secretref.ErrUnset, "C is not set"},
				{"health_check.node_token", "${env:}", secretref.ErrEmptyName, "empty"},
				{"streams[1].input.address", "${file:" + fx.files["missing"] + "}", os.ErrNotExist, "cannot read file"},
				{"streams[1].pipeline.processors[0].expression", "${env:A}", secretref.ErrUnset, "A is not set"},
				{"streams[1].pipeline.processors[0].expression", "${secret:B}", secretref.ErrUnset, "B is not set"},
			},
			want: treeOf(t, `{
			"streams": [
				{"output": {"token": "`+tokenValue+`"}},
				{"pipeline": {"processors": [{"expression": "${env:A} ${secret:B}"}]},
				 "input": {"address": "${file:`+fx.files["missing"]+`}"}}
			],
			"health_check": {"node_token": "${env:}", "hub_urls": ["ok", "`+secretValue+`", "${env:C}"]},
			"logging": "debug"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := deepCopy(tt.in)
			got, err := fx.res.Resolve(tt.in)
			checkErrs(t, err, tt.errs)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.in); diff != "" {
				t.Errorf("input mutated (-before +after):\n%s", diff)
			}
			// The result shares no container with the input.
			scribble(got)
			if diff := cmp.Diff(before, tt.in); diff != "" {
				t.Errorf("result aliases the input (-before +after):\n%s", diff)
			}
		})
	}
}

// deepCopy copies the containers Resolve knows.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(v))
		for k, e := range v {
			out[k] = e
		}
		return out
	case []string:
		return append([]string(nil), v...)
	default:
		return v
	}
}

// scribble overwrites every container of v.
func scribble(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			scribble(e)
			v[k] = "scribbled"
		}
		v["scribbled"] = true
	case []any:
		for i, e := range v {
			scribble(e)
			v[i] = "scribbled"
		}
	case map[string]string:
		for k := range v {
			v[k] = "scribbled"
		}
		v["scribbled"] = ""
	case []string:
		for i := range v {
			v[i] = "scribbled"
		}
	}
}

func TestResolveDefaultsToProcess(t *testing.T) {
	t.Setenv("FLOWPLANE_SECRETREF_TEST", tokenValue)
	t.Setenv("SVC_SECRET_FLOWPLANE_SECRETREF_TEST", secretValue)
	p := t.TempDir() + "/f"
	if err := os.WriteFile(p, []byte(fileValue+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := secretref.Resolver{}.String("x", "${env:FLOWPLANE_SECRETREF_TEST}|${secret:FLOWPLANE_SECRETREF_TEST}|${file:"+p+"}")
	if err != nil {
		t.Fatal(err)
	}
	if want := tokenValue + "|" + secretValue + "|" + fileValue; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFileTooLarge(t *testing.T) {
	p := t.TempDir() + "/big"
	big := strings.Repeat(fileValue, secretref.MaxFileSize/len(fileValue)+1)
	if err := os.WriteFile(p, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	custom := secretref.Resolver{ReadFile: func(string) ([]byte, error) { return []byte(big), nil }}
	for name, res := range map[string]secretref.Resolver{"default reader": {}, "custom reader": custom} {
		t.Run(name, func(t *testing.T) {
			_, err := res.String("a.b", "${file:"+p+"}")
			checkErrs(t, err, []wantErr{{"a.b", "${file:" + p + "}", secretref.ErrFile, "larger than"}})
		})
	}
	// A file of exactly MaxFileSize is accepted.
	exact := strings.Repeat("x", secretref.MaxFileSize)
	if err := os.WriteFile(p, []byte(exact), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := (secretref.Resolver{}).String("", "${file:"+p+"}"); err != nil || got != exact {
		t.Errorf("file of MaxFileSize: len %d, err %v", len(got), err)
	}
}

// TestReadErrorNeverLeaks feeds a reader whose error text quotes the content
// it holds: only the cause is reported, not the reader's wrapping text.
func TestReadErrorNeverLeaks(t *testing.T) {
	res := secretref.Resolver{ReadFile: func(p string) ([]byte, error) {
		return nil, &os.PathError{Op: "open " + fileValue, Path: p + fileValue, Err: errors.New("denied")}
	}}
	_, err := res.String("k", "${file:/etc/x}")
	checkErrs(t, err, []wantErr{{"k", "${file:/etc/x}", secretref.ErrFile, "cannot read file: denied"}})
}

func TestContains(t *testing.T) {
	tests := map[string]bool{
		"":                     false,
		"plain":                false,
		"${env:X}":             true,
		"a ${secret:Y} b":      true,
		"${file:/x}":           true,
		"${env:}":              true, // fails, but is a reference
		"${env:X:-d}":          true,
		"$${env:X}":            false,
		"$$${env:X}":           false,
		"$${env:X} ${env:Y}":   true,
		"${vault:x}":           false,
		"${env:X":              false,
		"${}":                  false,
		"${vault:${secret:Z}}": true,
		"${ENV:X}":             false,
		"${env:${env:X}}":      true,
		"${environment:X}":     false,
		"text with $ and { } ": false,
	}
	for in, want := range tests {
		if got := secretref.Contains(in); got != want {
			t.Errorf("Contains(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestErrorText(t *testing.T) {
	e := &secretref.Error{Path: "streams[0].output.token", Ref: "${env:TOKEN}", Err: errors.New("environment variable TOKEN is not set")}
	if got, want := e.Error(), "streams[0].output.token: ${env:TOKEN}: environment variable TOKEN is not set"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	_, err := secretref.Resolver{LookupEnv: func(string) (string, bool) { return "", false }}.String("streams[0].output.token", "${env:TOKEN}")
	if got, want := err.Error(), "streams[0].output.token: ${env:TOKEN}: environment variable TOKEN is not set"; got != want {
		t.Errorf("resolved error = %q, want %q", got, want)
	}
}

// TestResolveValues: every reference's own value is listed, not the string
// holding it, and defaults are not (they are in the configuration text).
func TestResolveValues(t *testing.T) {
	fx := newFixture(t)
	tree := map[string]any{
		"a": "/data/${env:TOKEN}/out",
		"b": []any{"x${secret:DB}y${file:" + fx.files["nl"] + "}", "${env:NOPE:-fallback}", "${env:TOKEN:-fallback}"},
		"c": "${env:EMPTY}",
		"d": "${env:NOPE}", // fails: not a value
		"e": "$${env:TOKEN}",
	}
	_, values, err := fx.res.ResolveValues(tree)
	if !errors.Is(err, secretref.ErrUnset) {
		t.Fatalf("err = %v, want ErrUnset", err)
	}
	want := []string{tokenValue, secretValue, fileValue, tokenValue, emptyValue}
	if strings.Join(values, "|") != strings.Join(want, "|") {
		t.Errorf("values = %q, want %q", values, want)
	}
}
