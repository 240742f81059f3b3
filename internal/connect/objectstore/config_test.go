package objectstore

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	_ "github.com/flowplane/flowplane/internal/connect/input"
	_ "github.com/flowplane/flowplane/internal/connect/output"
)

func TestExamplesBuild(t *testing.T) {
	for _, kind := range []component.Kind{component.KindInput, component.KindOutput} {
		conf := componenttest.Example(t, component.Default, kind, "object_store")
		var err error
		if kind == component.KindInput {
			_, err = component.Default.NewInput("object_store", conf, component.Resources{})
		} else {
			_, err = component.Default.NewOutput("object_store", conf, component.Resources{})
		}
		if err != nil {
			t.Errorf("%s example: %v", kind, err)
		}
	}
}

func TestOutputConfig(t *testing.T) {
	tests := []struct {
		name    string
		conf    map[string]any
		wantErr string // substring; empty for success
	}{
		{"minimal file", map[string]any{"url": "file:///tmp/x"}, ""},
		{"s3 with params", map[string]any{"url": "s3://b/p?region=us-east-1&endpoint=http://127.0.0.1:9000&use_path_style=true"}, ""},
		{"missing url", map[string]any{}, "url: required"},
		{"bad scheme", map[string]any{"url": "ftp://x/y"}, `url: scheme "ftp" is not file or s3`},
		{"s3 without bucket", map[string]any{"url": "s3:///p"}, "url: s3:///p names no bucket"},
		{"file without dir", map[string]any{"url": "file:///"}, "names no directory"},
		{"bad codec", map[string]any{"url": "file:///x", "codec": "csv"}, `codec: must be lines or json_array, got "csv"`},
		{"whole is input only", map[string]any{"url": "file:///x", "codec": "whole"}, "codec:"},
		{"bad compression", map[string]any{"url": "file:///x", "compression": "zstd"}, "compression:"},
		{"bad timeout", map[string]any{"url": "file:///x", "timeout": "0s"}, "timeout:"},
		{"unknown placeholder", map[string]any{"url": "file:///x", "path": "{{nope}}.jsonl"}, "path: unknown placeholder {{nope}}"},
		{"constant path", map[string]any{"url": "file:///x", "path": "out.jsonl"}, "would write every batch to the same object"},
		{"absolute path", map[string]any{"url": "file:///x", "path": "/a/{{uuid}}"}, "must not start with /"},
		{"unknown field", map[string]any{"url": "file:///x", "bucket": "b"}, "bucket"},
		{"secret not echoed", map[string]any{"url": "s3://b/%zz-secret"}, "url: not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewOutput(tt.conf, component.Resources{})
			checkErr(t, err, tt.wantErr)
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q shows the URL's query", err)
			}
		})
	}
}

func TestInputConfig(t *testing.T) {
	tests := []struct {
		name    string
		conf    map[string]any
		wantErr string
	}{
		{"minimal", map[string]any{"url": "file:///tmp/x"}, ""},
		{"all", map[string]any{"url": "s3://b", "prefix": "a/", "codec": "whole", "batch_size": float64(3), "poll_interval": "2s", "delete_after_read": true}, ""},
		{"missing url", map[string]any{"prefix": "x"}, "url: required"},
		{"bad codec", map[string]any{"url": "file:///x", "codec": "xml"}, "codec: must be lines, json_array or whole"},
		{"zero batch", map[string]any{"url": "file:///x", "batch_size": float64(0)}, "batch_size: must be at least 1"},
		{"bad poll", map[string]any{"url": "file:///x", "poll_interval": "soon"}, "poll_interval:"},
		{"errors joined", map[string]any{"url": "ftp://x", "codec": "xml"}, "codec:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewInput(tt.conf, component.Resources{})
			checkErr(t, err, tt.wantErr)
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("error %v, want none", err)
	case want != "" && err == nil:
		t.Errorf("no error, want %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("error %q, want it to contain %q", err, want)
	}
}

func TestMaterializeNamesPath(t *testing.T) {
	tests := []struct {
		name, input, output, want string
	}{
		{"output codec", "{type: memory, messages: ['a']}", "{type: object_store, url: 'file:///tmp/x', codec: csv}", "streams[0].output"},
		{"output unknown field", "{type: memory, messages: ['a']}", "{type: object_store, url: 'file:///tmp/x', bucket: b}", "streams[0].output"},
		{"output missing url", "{type: memory, messages: ['a']}", "{type: object_store}", "streams[0].output"},
		{"input batch_size type", "{type: object_store, url: 'file:///tmp/x', batch_size: many}", "{type: drop}", "streams[0].input"},
		{"input bad scheme", "{type: object_store, url: 'gs://b'}", "{type: drop}", "streams[0].input.url"},
		{"output bad placeholder", "{type: memory, messages: ['a']}", "{type: object_store, url: 'file:///tmp/x', path: 'a/{{x}}'}", "streams[0].output.path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := componenttest.Materialize(node(tt.input, tt.output))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %q", err, tt.want)
			}
			t.Logf("%v", err)
		})
	}
}

func TestPathTemplate(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 5, time.UTC)
	tests := []struct {
		tmpl, want string
	}{
		{"{{count}}.jsonl", "7.jsonl"},
		{"{{stream}}/{{date}}/{{timestamp_unix}}-{{timestamp_unix_nano}}", "s1/2026-11-24/" + fmt.Sprint(now.Unix()) + "-" + fmt.Sprint(now.UnixNano())},
		{"a{{ count }}b", "a7b"},
	}
	for _, tt := range tests {
		tm, err := parsePathTemplate("path", tt.tmpl)
		if err != nil {
			t.Fatalf("%q: %v", tt.tmpl, err)
		}
		if diff := cmp.Diff(tt.want, tm.render(7, now, "s1")); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.tmpl, diff)
		}
	}
	tm, _ := parsePathTemplate("path", "{{uuid}}")
	if a, b := tm.render(1, now, ""), tm.render(1, now, ""); a == b || len(a) != 36 {
		t.Errorf("uuids %q, %q: want two different ones", a, b)
	}
	for _, bad := range []string{"", "{{", "x{{count", "{{}}", "{{date}}"} {
		if _, err := parsePathTemplate("path", bad); err == nil || !strings.HasPrefix(err.Error(), "path: ") {
			t.Errorf("%q: error %v, want one naming path", bad, err)
		}
	}
}

// FuzzPathTemplate: a template either fails with an error naming the
// field or renders a non-empty key that does not start with a slash.
func FuzzPathTemplate(f *testing.F) {
	for _, s := range []string{"{{count}}", "a/{{uuid}}.json", "{{", "}}{{date}}", "{{ stream }}{{timestamp_unix_nano}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := parsePathTemplate("path", s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "path: ") {
				t.Fatalf("error %q does not name the field", err)
			}
			return
		}
		if !pathRE.MatchString(s) {
			t.Fatalf("template %q parses but the schema's pattern rejects it", s)
		}
		key := tm.render(1, time.Unix(0, 0), "s")
		if key == "" || strings.HasPrefix(key, "/") {
			t.Fatalf("template %q rendered %q", s, key)
		}
	})
}

var pathRE = regexp.MustCompile(pathPattern)

func TestIsFileblobTemp(t *testing.T) {
	for key, want := range map[string]bool{
		"a.jsonl.187a9f3c2b1d4e5f.tmp": true,
		"a.jsonl":                      false,
		"x.tmp":                        false,
		"notes.final.tmp":              false,
	} {
		if got := isFileblobTemp(key); got != want {
			t.Errorf("isFileblobTemp(%q) = %v", key, got)
		}
	}
}
