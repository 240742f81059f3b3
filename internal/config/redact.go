package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/flowplane/flowplane/internal/secretref"
)

// Redacted replaces a secret value wherever a message, an error or a log
// line would show it.
const Redacted = "[redacted]"

// MinSecretLen is the length, in characters, of the shortest value a
// Redactor scrubs. A shorter value would scrub every occurrence of a letter
// or a digit from every message, and guessing it is easy anyway: a secret
// worth the name is longer. Shorter resolved values are therefore not
// redacted (README "Secret references").
const MinSecretLen = 4

// MinFragmentLen is the length, in bytes, of the shortest part of a secret
// value a Redactor scrubs on its own: a message quoting a prefix or a piece
// of a value ("bad number syntax: \"57340b\"" for a token starting so)
// loses every run of text made of such pieces. Shorter pieces are left,
// or every message would lose its common words; a value's lines are
// scrubbed whole down to MinSecretLen characters.
const MinFragmentLen = 6

// maxFragments bounds the pieces a Redactor keeps (one per byte of every
// form of every value): a ${file:} reference may hold a megabyte. Past the
// bound, values added later are scrubbed whole and by lines only.
const maxFragments = 1 << 20

// Redactor scrubs secret values from text: every value a secret reference
// resolved to, and every literal credential (see [IsCredentialKey]), in its
// raw form and in the escaped forms messages quote it in (Go %q and %+q,
// JSON, the JSON Schema validator's single quotes, URL query and path
// escaping). Replacement is of substrings, longest first, so a value
// embedded in a longer string ("mkdir /data/<secret>: ...") is scrubbed
// too, and so is every line of a multi-line value and every run of text
// made of pieces of at least MinFragmentLen bytes of a value's forms (a
// prefix, a middle part), however the message cut the value, except where
// a piece overlaps a reference named in the text ("${secret:DB}", see
// secretref.Spans): a secret holding "secret" must not make a message
// about ${secret:X} unreadable.
//
// A Redactor is the second line of defence: an error at a configuration
// path that held a reference is rewritten by its path first (see
// [Taint]). A Redactor only grows: a value once added stays redacted for
// the life of the process, since a log line or a last_error may outlive the
// configuration that held it. The zero value and nil redact nothing. It is
// safe for concurrent use.
type Redactor struct {
	mu     sync.Mutex          // guards values; st and n are set under it
	values map[string]struct{} // raw values (and lines of values) added so far
	st     atomic.Pointer[scrubber]
	n      atomic.Int64 // len(values), read without the lock
}

// scrubber is an immutable snapshot of what a Redactor removes.
type scrubber struct {
	rep   *strings.Replacer   // every form of every value, longest first
	grams map[string]struct{} // every MinFragmentLen-byte piece of every form
}

// NewRedactor returns a Redactor of values.
func NewRedactor(values ...string) *Redactor {
	r := &Redactor{}
	r.Add(values...)
	return r
}

// Add makes values secret, and every line of each. Values and lines
// shorter than MinSecretLen are ignored.
func (r *Redactor) Add(values ...string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	added := false
	add := func(v string) {
		if utf8.RuneCountInString(v) < MinSecretLen {
			return
		}
		if _, ok := r.values[v]; ok {
			return
		}
		if r.values == nil {
			r.values = map[string]struct{}{}
		}
		r.values[v] = struct{}{}
		added = true
	}
	for _, v := range values {
		add(v)
		if strings.ContainsAny(v, "\r\n") {
			for _, line := range strings.FieldsFunc(v, func(c rune) bool { return c == '\n' || c == '\r' }) {
				add(line)
			}
		}
	}
	if added {
		r.rebuildLocked()
		r.n.Store(int64(len(r.values)))
	}
}

// Merge adds every value of o.
func (r *Redactor) Merge(o *Redactor) {
	if r == nil || o == nil || r == o {
		return
	}
	o.mu.Lock()
	vs := make([]string, 0, len(o.values))
	for v := range o.values {
		vs = append(vs, v)
	}
	o.mu.Unlock()
	r.Add(vs...)
}

// Len is the number of values r redacts; it takes no lock, for callers
// that skip work when there is nothing to redact.
func (r *Redactor) Len() int {
	if r == nil {
		return 0
	}
	return int(r.n.Load())
}

func (r *Redactor) rebuildLocked() {
	seen := map[string]bool{}
	var olds []string
	for v := range r.values {
		for _, f := range Forms(v) {
			if !seen[f] {
				seen[f] = true
				olds = append(olds, f)
			}
		}
	}
	// strings.Replacer tries its patterns in argument order at each
	// position: longest first, so that a value containing another is
	// scrubbed whole.
	slices.SortFunc(olds, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	pairs := make([]string, 0, 2*len(olds))
	grams := map[string]struct{}{}
	for _, o := range olds {
		pairs = append(pairs, o, Redacted)
		// Longest first: when the bound is reached the values left out
		// are the short ones, which the replacer scrubs whole anyway.
		for i := 0; i+MinFragmentLen <= len(o) && len(grams) < maxFragments; i++ {
			grams[o[i:i+MinFragmentLen]] = struct{}{}
		}
	}
	r.st.Store(&scrubber{rep: strings.NewReplacer(pairs...), grams: grams})
}

// String returns s with every secret value, line of one and run of pieces
// of one replaced by [Redacted].
func (r *Redactor) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	st := r.st.Load()
	if st == nil {
		return s
	}
	return st.rep.Replace(st.fragments(s))
}

// referenceSpans are the references named in s (secretref.Spans).
func referenceSpans(s string) [][2]int {
	if !strings.Contains(s, "${") {
		return nil
	}
	return secretref.Spans(s)
}

// fragments replaces every maximal run of s covered by pieces of secret
// forms, widened to whole UTF-8 sequences, by [Redacted].
func (st *scrubber) fragments(s string) string {
	if len(st.grams) == 0 || len(s) < MinFragmentLen {
		return s
	}
	var b strings.Builder
	last := 0                 // s[:last] is handled
	start, end := -1, -1      // the run being grown
	refs := referenceSpans(s) // left whole: they name a reference, hold no value
	flush := func() {
		for start > last && !utf8.RuneStart(s[start]) {
			start--
		}
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		start = max(start, last)
		b.WriteString(s[last:start])
		b.WriteString(Redacted)
		last = end
	}
	for i := 0; i+MinFragmentLen <= len(s); i++ {
		if _, ok := st.grams[s[i:i+MinFragmentLen]]; !ok {
			continue
		}
		for len(refs) > 0 && refs[0][1] <= i {
			refs = refs[1:]
		}
		if len(refs) > 0 && refs[0][0] < i+MinFragmentLen {
			continue // the piece overlaps a reference
		}
		if start >= 0 && i <= end {
			end = i + MinFragmentLen
			continue
		}
		if start >= 0 {
			flush()
		}
		start, end = i, i+MinFragmentLen
	}
	if start < 0 {
		return s
	}
	flush()
	b.WriteString(s[last:])
	return b.String()
}

// Problems returns ps with secret values removed from their messages.
func (r *Redactor) Problems(ps []Problem) []Problem {
	if r == nil || r.st.Load() == nil {
		return ps
	}
	out := make([]Problem, len(ps))
	for i, p := range ps {
		p.Message = r.String(p.Message)
		out[i] = p
	}
	return out
}

// Forms returns v and the escaped forms in which messages quote it, without
// surrounding quotes: each escaping is done rune by rune (or byte by byte),
// so the escaped form of v is a substring of the escaped form of any string
// holding v.
func Forms(v string) []string {
	forms := []string{v}
	add := func(f string) {
		if f != "" && !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	q := strconv.Quote(v)
	q = q[1 : len(q)-1]
	add(q) // %q
	a := strconv.QuoteToASCII(v)
	add(a[1 : len(a)-1]) // %+q
	// The JSON Schema validator's quote: %q with " unescaped and ' escaped.
	// It unescapes on the whole quoted text, so a value ending in a
	// backslash at the end of the quoted text loses the backslash escaping
	// it (`'x\'` for x\): that form is listed too.
	js := strings.ReplaceAll(strings.ReplaceAll(q, `\"`, `"`), `'`, `\'`)
	add(js)
	if t, ok := strings.CutSuffix(js, `\\`); ok {
		add(t + `\`)
	}
	for _, html := range []bool{false, true} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		_ = enc.Encode(v) // a string always encodes
		j := strings.TrimSuffix(b.String(), "\n")
		add(j[1 : len(j)-1])
	}
	add(url.QueryEscape(v))
	add(url.PathEscape(v))
	return forms
}
