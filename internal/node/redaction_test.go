package node_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/flowplane/flowplane/internal/config"
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

// leaks returns the surfaces holding s in any of its forms, or its core:
// letters that any escaping leaves as they are, so that a form the
// redactor does not know is caught too.
func leaks(s, core string, surfaces map[string]string) []string {
	var out []string
	for name, text := range surfaces {
		for _, f := range append(config.Forms(s), core) {
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
			"    pipeline: {processors: []}\n    output: {type: drop}\n"
		v := h.expect(t, 200, "POST", "/configuration/validate", configBody(t, "yaml", bad))
		surfaces["validate"] = string(v.Body)
		surfaces["apply (422)"] = string(h.expect(t, 422, "POST", "/configuration/apply", configBody(t, "yaml", bad)).Body)
		if n := strings.Count(surfaces["validate"], config.Redacted); n < 3 {
			rt.Fatalf("the secret should be quoted, redacted, in 3 problems: %s", v.Body)
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
