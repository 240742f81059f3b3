package config

import (
	"strings"

	"github.com/flowplane/flowplane/internal/secretref"
)

// Taint knows which strings of a configuration hold values of secret
// references ("${env:}", "${file:}", "${secret:}"). A problem found at
// one of them, by the schema check, the semantic rules or a component's
// constructor, names the path and the references only: no message about
// a tainted string may quote it, since any part of it (a line, a prefix,
// an escaped form) may be part of a secret. The [Redactor] is the second
// line of defence, for text found at other paths.
//
// The zero value and nil taint nothing. A Taint is immutable once made.
type Taint struct {
	refs map[string][]string // path -> references that resolved there
}

// newTaint returns the taint of a resolution.
func newTaint(ts []secretref.Tainted) *Taint {
	t := &Taint{refs: make(map[string][]string, len(ts))}
	for _, x := range ts {
		t.refs[x.Path] = x.Refs
	}
	return t
}

// Problems returns ps with every problem about a tainted string rewritten
// to name its path and references: a problem at the string's path, or at
// a path above it whose message starts with the rest of the path
// ("condition: ..." at streams[0].pipeline.processors[0], as component
// constructors write theirs). The message keeps the original wording only
// when it is fixed text (no quotes, no line breaks, nothing redacted).
// ps have been through the [Redactor] already: the references the
// rewritten messages name must not be scrubbed by it.
func (t *Taint) Problems(ps []Problem) []Problem {
	if t == nil || len(t.refs) == 0 {
		return ps
	}
	out := make([]Problem, len(ps))
	for i, p := range ps {
		if path, detail, ok := t.locate(p); ok {
			p = Problem{Path: path, Message: taintedMessage(t.refs[path], detail)}
		}
		out[i] = p
	}
	return out
}

// locate returns the tainted path a problem is about and the message
// without the part naming that path.
func (t *Taint) locate(p Problem) (path, detail string, ok bool) {
	if _, ok := t.refs[p.Path]; ok {
		return p.Path, p.Message, true
	}
	best := ""
	for q := range t.refs {
		rel, under := strings.CutPrefix(q, p.Path)
		switch {
		case !under:
			continue
		case p.Path == "":
		case strings.HasPrefix(rel, "."):
			rel = rel[1:]
		case strings.HasPrefix(rel, "["):
		default:
			continue
		}
		if strings.HasPrefix(p.Message, rel+": ") && len(q) > len(best) {
			best, detail = q, p.Message[len(rel)+2:]
		}
	}
	return best, detail, best != ""
}

// quotedValue is a value quoted whole by a message and redacted whole:
// nothing of it is left, and the rest of the message may be fixed text.
var quotedValue = strings.NewReplacer(`"`+Redacted+`"`, "the value", `'`+Redacted+`'`, "the value")

// taintedMessage is the message of a problem about a string holding refs:
// the detail is kept only when it is fixed text once a value it quoted
// whole (and that was redacted whole) is called "the value".
func taintedMessage(refs []string, detail string) string {
	msg := "value of " + strings.Join(refs, ", ") + " is not valid"
	detail = quotedValue.Replace(detail)
	if detail != "" && !strings.ContainsAny(detail, "\"'`|\n\r\\") && !strings.Contains(detail, Redacted) {
		return msg + ": " + detail
	}
	return msg + " (the error is withheld: it would show a part of the value)"
}
