package node_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/wire"
)

// syncBuffer is a log sink read while the node writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// secretMark is in every generated secret, so that no text the node writes
// anyway ("info", a timestamp) can pass for one.
const secretMark = "Zq7"

// secretAlphabet has what escapes differently in Go %q, JSON, URLs and
// the schema validator's quotes, and non-ASCII. It lacks "[" and "]": a
// secret holding one could be made of the redaction mark and its
// neighbours ("d]x" in "[redacted]x"), which is no leak; and "/": an error
// about a path shows a part of it (mkdir /proc/x-a for /proc/x-a/b), and
// so a part of a secret holding "/".
var secretAlphabet = []rune("aZ09 \"'`\\\n\t\r<>&%+=?:;,{}$@#*|~éß€😀\u2028中\x7f")

// secretGen draws secrets of at least config.MinSecretLen characters
// holding secretMark anywhere, without a trailing newline (a ${file:}
// reference strips those).
func secretGen() *rapid.Generator[string] {
	part := rapid.StringOfN(rapid.RuneFrom(secretAlphabet), 0, 10, -1)
	return rapid.Custom(func(t *rapid.T) string {
		return part.Draw(t, "before") + secretMark + part.Draw(t, "after")
	}).Filter(func(s string) bool {
		return utf8.RuneCountInString(s) >= config.MinSecretLen && !strings.HasSuffix(s, "\n") && !strings.HasSuffix(s, "\r")
	})
}

// leaks returns the surfaces holding s in any of its forms, a line of it,
// a piece of MinFragmentLen bytes of one of its forms, or its core:
// letters that any escaping leaves as they are, so that a form the
// redactor does not know is caught too.
func leaks(s, core string, surfaces map[string]string) []string {
	var out []string
	var pieces []string // lines and windows of MinFragmentLen bytes
	for _, f := range config.Forms(s) {
		for i := 0; i+config.MinFragmentLen <= len(f); i++ {
			pieces = append(pieces, f[i:i+config.MinFragmentLen])
		}
	}
	for _, line := range strings.FieldsFunc(s, func(c rune) bool { return c == '\n' || c == '\r' }) {
		if utf8.RuneCountInString(line) >= config.MinSecretLen {
			pieces = append(pieces, config.Forms(line)...)
		}
	}
	for name, text := range surfaces {
		for _, f := range append(append(config.Forms(s), core), pieces...) {
			if strings.Contains(text, f) {
				out = append(out, fmt.Sprintf("%s holds %q: %.600s", name, f, text))
				break
			}
		}
	}
	return out
}

// TestSecretsNeverInAnySurface is a property over random secret values
// (quotes, backslashes, newlines, non-ASCII): read from a file by a
// ${file:} reference and embedded in longer strings, a secret reaches
// validation problems (quoted by the schema check), the last_error of
// failing streams (an error quoting the path it could not create or
// open), operations, events and the node's log, and is in none of them.
func TestSecretsNeverInAnySurface(t *testing.T) {
	for _, format := range []string{"plain", "json"} {
		t.Run(format+" log", func(t *testing.T) { secretsNeverInAnySurface(t, format) })
	}
}

func secretsNeverInAnySurface(t *testing.T, logFormat string) {
	logs := &syncBuffer{}
	h := newHarness(t, doc(hcLocal, genStream("a", "a")), harnessOptions{logs: logs, logFormat: logFormat})
	dir := t.TempDir()
	var seen []string // every secret so far: none may show up later either
	iteration := 0
	rapid.Check(t, func(rt *rapid.T) {
		iteration++
		secret := secretGen().Draw(rt, "secret")
		seen = append(seen, secret)
		file := filepath.Join(dir, fmt.Sprintf("secret-%d", iteration))
		if err := os.WriteFile(file, []byte(secret), 0o600); err != nil {
			rt.Fatal(err)
		}
		ref := "${file:" + file + "}"
		logFrom := len(logs.String())
		surfaces := map[string]string{}
		get := func(path string) {
			surfaces["GET "+path] = string(h.do(t, "GET", path, "").Body)
		}

		// Problems: the schema check quotes the values it rejects.
		bad := "logging: {level: \"" + ref + "\"}\n" + hcLocal + "streams:\n" +
			"  - id: \"id " + ref + " x\"\n    input: {type: generate, context: '{}', interval: \"every " + ref + "\"}\n" +
			"    pipeline: {processors: []}\n    output: {type: drop}\n" +
			// An expression compiler quotes the source line it fails on.
			"  - id: expr\n    input: {type: generate, context: '{}', interval: 1s}\n" +
			"    pipeline: {processors: [{type: filter, condition: \"this.x > " + ref + "\"}]}\n    output: {type: drop}\n"
		v := h.expect(t, 200, "POST", "/configuration/validate", configBody(t, "yaml", bad))
		surfaces["validate"] = string(v.Body)
		surfaces["apply (422)"] = string(h.expect(t, 422, "POST", "/configuration/apply", configBody(t, "yaml", bad)).Body)
		named, _ := json.Marshal("value of " + ref + " is not valid")
		if n := strings.Count(surfaces["validate"], strings.Trim(string(named), `"`)); n < 3 {
			rt.Fatalf("3 problems should name the reference: %s", v.Body)
		}

		// Run time: paths that cannot be created or opened.
		good := doc(hcLocal, genStream("a", "a"),
			"  - id: out\n    input: {type: generate, context: '{}', interval: 1h, batch_size: 1}\n"+
				"    pipeline: {processors: []}\n    output: {type: file, path: \"/proc/x-"+ref+"/out.txt\"}\n",
			"  - id: in\n    input: {type: file, path: \"/nonexistent-"+ref+".txt\"}\n"+
				"    pipeline: {processors: []}\n    output: {type: drop}\n")
		apply := decode[wire.Operation](t, h.expect(t, 202, "POST", "/configuration/apply", configBody(t, "yaml", good)))
		surfaces["apply"] = fmt.Sprint(h.waitOp(t, apply.OperationID))
		var in wire.Stream
		eventually(t, "streams in and out failed", func() (bool, string) {
			in = h.stream(t, "in")
			out := h.stream(t, "out")
			return in.Observed.LastError != "" && out.Observed.LastError != "", in.Observed.LastError + " / " + out.Observed.LastError
		})
		if !strings.Contains(in.Observed.LastError, "/nonexistent-"+config.Redacted) {
			rt.Fatalf("last_error of in: %q", in.Observed.LastError)
		}
		restart := h.action(t, "in", "restart")
		h.waitOp(t, restart.OperationID)
		for _, path := range []string{"/streams", "/streams/in", "/streams/out", "/operations?page_size=100",
			"/operations/" + apply.OperationID, "/events?page_size=100", "/status", "/node", "/health",
			"/configuration", "/configuration/diff?from=v1"} {
			get(path)
		}
		log := logs.String()[logFrom:]
		surfaces["log"] = log
		if !strings.Contains(log, "/nonexistent-"+config.Redacted) {
			rt.Fatalf("the log does not show the failing open: %s", log)
		}
		for _, s := range seen {
			if l := leaks(s, secretMark, surfaces); len(l) > 0 {
				rt.Fatalf("secret %q leaks:\n%s", s, strings.Join(l, "\n"))
			}
		}
	})
}

// TestSecretsEmbeddedInRuntimeErrors: a secret that is part of a longer
// value (a path) does not show in an error quoting only a part of that
// value (the directory that could not be created), on any surface.
func TestSecretsEmbeddedInRuntimeErrors(t *testing.T) {
	const secret = "emb3dded-Secret-0c1d"
	t.Setenv("SVC_SECRET_FLOWPLANE_NODE_PART", secret)
	logs := &syncBuffer{}
	out := "  - id: out\n    input: {type: generate, context: '{}', interval: 1h, batch_size: 1}\n" +
		"    pipeline: {processors: []}\n    output: {type: file, path: \"/proc/x-${secret:FLOWPLANE_NODE_PART}/sub/out.txt\"}\n"
	h := newHarness(t, doc(hcLocal, genStream("a", "a"), out), harnessOptions{noWait: true, logs: logs})
	var s wire.Stream
	eventually(t, "stream out failed", func() (bool, string) {
		s = h.stream(t, "out")
		return s.Observed.LastError != "", s.Observed.State
	})
	if !strings.Contains(s.Observed.LastError, "mkdir /proc/x-"+config.Redacted+":") {
		t.Errorf("last_error = %q", s.Observed.LastError)
	}
	restart := h.action(t, "out", "restart")
	h.waitOp(t, restart.OperationID)
	surfaces := map[string]string{}
	for _, path := range []string{"/streams", "/streams/out", "/operations", "/operations/" + restart.OperationID, "/events?page_size=100", "/status"} {
		surfaces[path] = string(h.expect(t, 200, "GET", path, "").Body)
	}
	surfaces["log"] = logs.String()
	for _, l := range leaks(secret, "emb3dded", surfaces) {
		t.Error(l)
	}
}

// TestValidateNamesReferencesNotValues reproduces the leaks of issue 29: a
// multi-line ${file:} value and an ${env:} value inside expressions (whose
// compiler quotes the source line and a piece of a number), and both in
// number fields. The node's validate names each path and reference, and
// its answer holds no line and no piece of either value.
func TestValidateNamesReferencesNotValues(t *testing.T) {
	const fileValue = "k3y-LINE-1-Qx9w\nk3y-LINE-2-Qx9w\n57340b-LINE-3"
	const envValue = "57340bfe2a9c-T0KEN-Qx9w"
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(fileValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLOWPLANE_TEST_COUNT", envValue)
	h := newHarness(t, doc(hcLocal, genStream("a", "a")))
	fileRef, envRef := "${file:"+file+"}", "${env:FLOWPLANE_TEST_COUNT}"
	stream := func(input, processor string) string {
		return "  - id: x\n    input: {type: generate, context: '{}', interval: 1s" + input + "}\n" +
			"    pipeline: {processors: [" + processor + "]}\n    output: {type: drop}\n"
	}
	tests := []struct {
		name, stream, path, ref string
	}{
		{"multi-line file value in an expression", stream("", "{type: filter, condition: 'this.x > "+fileRef+"'}"),
			"streams[0].pipeline.processors[0].condition", fileRef},
		{"env value in an expression", stream("", "{type: mapping, expression: 'this.x + "+envRef+"'}"),
			"streams[0].pipeline.processors[0].expression", envRef},
		{"multi-line file value in a number field", stream(", batch_size: \""+fileRef+"\"", ""),
			"streams[0].input.batch_size", fileRef},
		{"env value in a number field", stream(", count: \""+envRef+"\"", ""),
			"streams[0].input.count", envRef},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := h.expect(t, 200, "POST", "/configuration/validate", configBody(t, "yaml", doc(hcLocal, tc.stream)))
			got := decode[node.Report](t, v)
			if got.Valid || len(got.Errors) != 1 {
				t.Fatalf("validate: %s", v.Body)
			}
			want := "value of " + tc.ref + " is not valid"
			if e := got.Errors[0]; e.Path != tc.path || !strings.HasPrefix(e.Message, want) {
				t.Errorf("error = %s: %s, want %s: %s...", e.Path, e.Message, tc.path, want)
			}
			for _, value := range []string{fileValue, envValue} {
				if l := leaks(value, "57340b", map[string]string{"validate": string(v.Body)}); len(l) > 0 {
					t.Error(l)
				}
				for _, line := range strings.Split(value, "\n") {
					if strings.Contains(string(v.Body), line) {
						t.Errorf("validate holds %q: %s", line, v.Body)
					}
				}
			}
		})
	}
}
