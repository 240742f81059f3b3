package secretref

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// MaxFileSize is the largest file a ${file:...} reference may read. Secrets
// are small; the bound keeps a reference to /dev/zero or a log file from
// exhausting memory.
const MaxFileSize = 1 << 20

// secretPrefix is prepended to the NAME of ${secret:NAME}.
const secretPrefix = "SVC_SECRET_"

// Resolver resolves references. Zero fields mean the process environment
// (os.LookupEnv) and reading the file system (os.ReadFile, stopping past
// MaxFileSize). Content longer than MaxFileSize fails whichever reader
// returned it. A Resolver holds no state and is safe for concurrent use if
// its functions are.
type Resolver struct {
	LookupEnv func(string) (string, bool)
	ReadFile  func(string) ([]byte, error)
}

// Resolve returns a deep copy of tree with every reference resolved. The tree
// is made of map[string]any, []any, map[string]string, []string, string and
// scalars (float64, bool, nil, int, ...). Containers of those types are
// copied; values of any other type are returned as they are, shared with
// tree. tree itself is never modified.
//
// The error joins (errors.Join) one [*Error] per failing reference, every one
// of them reported, in a stable order (map keys sorted). The returned tree is
// complete even then, with failing references left as written.
func (r Resolver) Resolve(tree any) (any, error) {
	out, _, err := r.ResolveValues(tree)
	return out, err
}

// ResolveValues is [Resolver.Resolve] that also returns the value every
// reference resolved to, in the order met (duplicates kept), so that the
// caller can keep them out of everything it shows: a reference embedded
// in a longer string ("/data/${secret:X}/out") yields the value of X, not
// the whole string. Defaults are not in the list: they are written in the
// configuration text itself.
func (r Resolver) ResolveValues(tree any) (any, []string, error) {
	out, res, err := r.ResolveTainted(tree)
	return out, res.Values, err
}

// Resolution is what a resolution put into a tree, for the caller to keep
// out of everything it shows.
type Resolution struct {
	// Values is what every reference resolved to, in the order met
	// (duplicates kept), defaults excluded.
	Values []string
	// Tainted lists the strings of the tree that hold a resolved value, in
	// the order met: a message about one of them must name its path and
	// references, never its text.
	Tainted []Tainted
}

// Tainted is one string of a tree that holds the value of a reference.
type Tainted struct {
	// Path locates the string, written as [Error.Path].
	Path string
	// Refs are the references of the string that resolved to a value (not
	// to a default), as written ("${env:COUNT}"), in order.
	Refs []string
}

// ResolveTainted is [Resolver.ResolveValues] that also reports which
// strings of the tree hold resolved values, so that an error found later
// at one of those paths can be rewritten to name the references instead
// of quoting the value (taint by structure, before any text matching).
func (r Resolver) ResolveTainted(tree any) (any, Resolution, error) {
	w := walker{r: r}
	out := w.walk(tree)
	return out, Resolution{Values: w.values, Tainted: w.tainted}, errors.Join(w.errs...)
}

// String resolves one string found at path (written as in [Error.Path]).
// Errors are joined like Resolve's; on error the result keeps the failing
// references as written.
func (r Resolver) String(path, s string) (string, error) {
	w := walker{r: r, path: []step{{key: path}}}
	out := w.expand(s)
	return out, errors.Join(w.errs...)
}

// Contains reports whether s holds a reference of a known scheme, including
// one that would fail to resolve. Escaped text ("$${env:X}") and unknown
// schemes do not count.
func Contains(s string) bool {
	found := false
	scan(s, func(string) {}, func(string, string, string) { found = true })
	return found
}

// walker carries one resolution: the path to the current value, kept as a
// stack and rendered only when an error needs it, and the errors so far.
type walker struct {
	r      Resolver
	path   []step
	errs   []error
	values []string // what references resolved to, defaults excluded
	// tainted collects the strings holding resolved values.
	tainted []Tainted
	// only, when set, resolves references of that scheme alone (others
	// stay as written); secrets then collects NAME -> value.
	only    string
	secrets map[string]string
	// visit, when set, is told every reference instead of resolving it
	// (References).
	visit func(ref, scheme, body string)
}

// step is a map key, or an array index when isIdx.
type step struct {
	key   string
	index int
	isIdx bool
}

func (w *walker) pathString() string {
	var b strings.Builder
	for i, s := range w.path {
		switch {
		case s.isIdx:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		case i > 0:
			b.WriteByte('.')
			b.WriteString(s.key)
		default:
			b.WriteString(s.key)
		}
	}
	return b.String()
}

func (w *walker) push(s step) { w.path = append(w.path, s) }
func (w *walker) pop()        { w.path = w.path[:len(w.path)-1] }

func (w *walker) walk(v any) any {
	switch t := v.(type) {
	case string:
		if !strings.Contains(t, "${") {
			return v // no copy, and no new interface value
		}
		return w.expand(t)
	case map[string]any:
		if t == nil {
			return v
		}
		out := make(map[string]any, len(t))
		for _, k := range sortedKeys(t) {
			w.push(step{key: k})
			out[k] = w.walk(t[k])
			w.pop()
		}
		return out
	case []any:
		if t == nil {
			return v
		}
		out := make([]any, len(t))
		for i, e := range t {
			w.push(step{index: i, isIdx: true})
			out[i] = w.walk(e)
			w.pop()
		}
		return out
	case map[string]string:
		if t == nil {
			return v
		}
		out := make(map[string]string, len(t))
		for _, k := range sortedKeys(t) {
			w.push(step{key: k})
			out[k] = w.expand(t[k])
			w.pop()
		}
		return out
	case []string:
		if t == nil {
			return v
		}
		out := make([]string, len(t))
		for i, e := range t {
			w.push(step{index: i, isIdx: true})
			out[i] = w.expand(e)
			w.pop()
		}
		return out
	default:
		return v
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// expand resolves the references of one string.
func (w *walker) expand(s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	var refs []string // resolved to a value, not a default
	scan(s, func(text string) { b.WriteString(text) }, func(ref, scheme, body string) {
		if w.visit != nil {
			w.visit(ref, scheme, body)
			b.WriteString(ref)
			return
		}
		if w.only != "" && scheme != w.only {
			b.WriteString(ref)
			return
		}
		v, fromDefault, err := w.r.resolve(scheme, body)
		if err != nil {
			w.errs = append(w.errs, &Error{Path: w.pathString(), Ref: ref, Err: err})
			b.WriteString(ref)
			return
		}
		if !fromDefault {
			refs = append(refs, ref)
			w.values = append(w.values, v)
			if w.secrets != nil {
				w.secrets[cutDefault(body)] = v
			}
		}
		b.WriteString(v)
	})
	if len(refs) > 0 {
		w.tainted = append(w.tainted, Tainted{Path: w.pathString(), Refs: refs})
	}
	return b.String()
}

var schemes = [...]string{"env", "file", "secret"}

// scan splits s into literal text (escapes already undone) and references
// of known schemes, in order. It is the one parser: expand and Contains
// share it so they cannot disagree.
func scan(s string, text func(string), ref func(ref, scheme, body string)) {
	i := 0 // s[:i] has been handed out
	from := 0
	for {
		j := strings.Index(s[from:], "${")
		if j < 0 {
			break
		}
		j += from
		if j > i && s[j-1] == '$' { // "$${": a literal "${"
			text(s[i:j])
			i, from = j+1, j+2
			continue
		}
		scheme, body, end, ok := parseRef(s, j)
		if !ok {
			from = j + 2
			continue
		}
		text(s[i:j])
		ref(s[j:end], scheme, body)
		i, from = end, end
	}
	text(s[i:])
}

// parseRef reads a reference of a known scheme starting at s[j:], which
// begins with "${". end is the index just past its "}".
func parseRef(s string, j int) (scheme, body string, end int, ok bool) {
	rest := s[j+2:]
	for _, sc := range schemes {
		if len(rest) > len(sc) && rest[len(sc)] == ':' && rest[:len(sc)] == sc {
			body = rest[len(sc)+1:]
			k := strings.IndexByte(body, '}')
			if k < 0 {
				return "", "", 0, false
			}
			return sc, body[:k], j + 2 + len(sc) + 1 + k + 1, true
		}
	}
	return "", "", 0, false
}

// cutDefault is an env or secret reference's body without its default.
func cutDefault(body string) string {
	name, _, _ := strings.Cut(body, ":-")
	return name
}

// resolve returns the value of one reference, and whether it is the
// reference's default. Its error never holds the value.
func (r Resolver) resolve(scheme, body string) (string, bool, error) {
	if strings.Contains(body, "${") {
		return "", false, &reason{"references do not nest", ErrNested}
	}
	switch scheme {
	case "file":
		if body == "" {
			return "", false, &reason{"empty file path", ErrEmptyName}
		}
		v, err := r.readFile(body)
		return v, false, err
	default: // env, secret
		name, def, hasDef := strings.Cut(body, ":-")
		if name == "" {
			return "", false, &reason{"empty variable name", ErrEmptyName}
		}
		if !validName(name) {
			return "", false, &reason{fmt.Sprintf("invalid variable name %q: use letters, digits and _", name), ErrBadName}
		}
		variable := name
		if scheme == "secret" {
			variable = secretPrefix + name
		}
		v, set := r.lookupEnv(variable)
		switch {
		case hasDef && v == "":
			return def, true, nil
		case set:
			return v, false, nil
		case scheme == "secret":
			return "", false, fmt.Errorf("secret %s is %w (environment variable %s)", name, ErrUnset, variable)
		default:
			return "", false, fmt.Errorf("environment variable %s is %w", name, ErrUnset)
		}
	}
}

func validName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func (r Resolver) lookupEnv(name string) (string, bool) {
	if r.LookupEnv != nil {
		return r.LookupEnv(name)
	}
	return os.LookupEnv(name)
}

func (r Resolver) readFile(path string) (string, error) {
	read := r.ReadFile
	if read == nil {
		read = readBounded
	}
	data, err := read(path)
	if err != nil {
		return "", &fileError{cause: err}
	}
	if len(data) > MaxFileSize {
		return "", &reason{fmt.Sprintf("%s: larger than %d bytes", ErrFile, MaxFileSize), ErrFile}
	}
	s := string(data)
	for {
		if t, ok := strings.CutSuffix(s, "\r\n"); ok {
			s = t
		} else if t, ok := strings.CutSuffix(s, "\n"); ok {
			s = t
		} else {
			return s, nil
		}
	}
}

// readBounded is os.ReadFile that stops one byte past MaxFileSize.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFileSize+1))
}

// Spans returns the byte ranges [start, end) of the references in s,
// escaped or not ("${env:TOKEN}", "$${secret:DB}"), for a redactor to
// leave them whole: a message naming a reference holds no value. Only
// well-formed references count (an env or secret name, a file path
// without spaces), so that a stray "${env:" cannot shelter the text after
// it.
func Spans(s string) [][2]int {
	var out [][2]int
	for from := 0; ; {
		j := strings.Index(s[from:], "${")
		if j < 0 {
			return out
		}
		j += from
		scheme, body, end, ok := parseRef(s, j)
		if !ok || !plainBody(scheme, body) {
			from = j + 2
			continue
		}
		out = append(out, [2]int{j, end})
		from = end
	}
}

// plainBody reports whether a reference's body is a name (env, secret;
// with a default of plain text) or a path (file) that cannot hide other
// text.
func plainBody(scheme, body string) bool {
	if len(body) > 4096 || strings.ContainsAny(body, " \t\r\n\"'`") {
		return false
	}
	if scheme == "file" {
		return body != ""
	}
	name, _, _ := strings.Cut(body, ":-")
	return name != "" && validName(name)
}
