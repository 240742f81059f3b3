package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"go.yaml.in/yaml/v3"

	"github.com/flowplane/flowplane/internal/secretref"
)

// Mask replaces the value of a literal credential in every configuration
// the Node API serves. It reads as itself in YAML (plain or quoted), JSON
// and TOML strings, so a masked document still parses.
const Mask = "<masked>"

// IsCredentialKey reports whether a configuration key names a credential:
// node_token, api_token, the token and password of a component's auth, a
// header such as Authorization or X-Api-Key. Case and "-" versus "_" do not
// matter. The names: password, passwd, token, secret, apikey, api_key,
// cookie, credentials, private_key, authorization, and any name ending in
// _token, _password, _secret, _api_key, _apikey or authorization.
func IsCredentialKey(key string) bool {
	k := strings.ToLower(strings.ReplaceAll(key, "-", "_"))
	switch k {
	case "password", "passwd", "token", "secret", "apikey", "api_key", "cookie", "credentials", "private_key":
		return true
	}
	for _, suffix := range []string{"_token", "_password", "_secret", "_api_key", "_apikey", "authorization"} {
		if strings.HasSuffix(k, suffix) {
			return true
		}
	}
	return false
}

// credential is a string held by a credential key, with its location.
type credential struct {
	path  []any // keys (string) and indices (int) from the root
	value string
}

// credentials lists the scalars held by credential keys of tree, in a
// stable order: a string or number value, or those of an array or object
// value (a credential key holding an object makes all of it credential).
func credentials(tree any) []credential {
	var out []credential
	var walk func(v any, path []any, cred bool)
	walk = func(v any, path []any, cred bool) {
		switch t := v.(type) {
		case string:
			if cred {
				out = append(out, credential{path: slices.Clone(path), value: t})
			}
		case float64:
			if cred {
				out = append(out, credential{path: slices.Clone(path), value: strconv.FormatFloat(t, 'f', -1, 64)})
			}
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(t[k], append(path, k), cred || IsCredentialKey(k))
			}
		case []any:
			for i, e := range t {
				walk(e, append(path, i), cred)
			}
		}
	}
	walk(tree, nil, false)
	return out
}

// credentialValues are the strings of tree's credential keys, to redact.
func credentialValues(tree any) []string {
	var out []string
	for _, c := range credentials(tree) {
		// A reference still in a resolved tree failed to resolve; its
		// problem names it, and pieces of its text must not be scrubbed
		// from that problem. The configuration is refused anyway.
		if !secretref.Contains(c.value) {
			out = append(out, c.value)
		}
	}
	return out
}

// MaskCredentials returns a configuration text fit to be served: the value
// of every credential key (see [IsCredentialKey]) written as a literal is
// replaced by [Mask]; a value holding a secret reference ("${secret:X}",
// "Bearer ${env:T}") is shown as written, since it holds no secret.
//
// The text keeps its comments and layout: each literal is replaced where it
// is written (raw, or escaped as in a quoted string), comments included.
// The result is checked by parsing it again; should that not give exactly
// the document with its credentials masked (a value written with escapes
// that stand for plain letters, a block scalar, a one-letter password that
// also occurs elsewhere), the masked document is served re-encoded in its
// format instead, without comments. Text that does not parse (a draft is
// saved whatever it holds) has the rest of every line naming a credential
// key masked.
func MaskCredentials(content []byte, f Format) []byte {
	tree, err := Tree(content, f)
	if err != nil {
		return maskLines(content)
	}
	var literal []credential
	for _, c := range credentials(tree) {
		if c.value != "" && c.value != Mask && !secretref.Contains(c.value) {
			literal = append(literal, c)
		}
	}
	if len(literal) == 0 {
		return content
	}
	want := tree
	for _, c := range literal {
		want = setPath(want, c.path, Mask)
	}
	seen := map[string]bool{}
	var olds []string
	for _, c := range literal {
		for _, form := range append(Forms(c.value), strings.ReplaceAll(c.value, "'", "''")) {
			if !seen[form] {
				seen[form] = true
				olds = append(olds, form)
			}
		}
	}
	slices.SortFunc(olds, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(olds))
	for _, o := range olds {
		pairs = append(pairs, o, Mask)
	}
	masked := []byte(strings.NewReplacer(pairs...).Replace(string(content)))
	if got, err := Tree(masked, f); err == nil && equalTrees(got, want) {
		return masked
	}
	out, err := encode(want, f)
	if err != nil {
		return maskLines(content) // unreachable: want came from a parse
	}
	return out
}

// setPath returns tree with the value at path replaced, modifying tree's
// containers in place (callers own the tree).
func setPath(tree any, path []any, v any) any {
	if len(path) == 0 {
		return v
	}
	switch t := tree.(type) {
	case map[string]any:
		k := path[0].(string)
		t[k] = setPath(t[k], path[1:], v)
	case []any:
		i := path[0].(int)
		t[i] = setPath(t[i], path[1:], v)
	}
	return tree
}

func equalTrees(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// encode writes a value tree in format f.
func encode(tree any, f Format) ([]byte, error) {
	switch f {
	case YAML:
		var b bytes.Buffer
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		if err := enc.Encode(tree); err != nil {
			return nil, err
		}
		return b.Bytes(), enc.Close()
	case JSON:
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		err := enc.Encode(tree)
		return b.Bytes(), err
	case TOML:
		return toml.Marshal(tree)
	}
	return nil, fmt.Errorf("%w: %q", ErrFormat, f)
}

// keyOnLine finds a key followed by ":" or "=", quoted or not.
var keyOnLine = regexp.MustCompile(`["']?([A-Za-z0-9_.-]+)["']?\s*[:=]`)

// maskLines masks, on every line naming a credential key, what follows the
// key, unless it holds a secret reference.
func maskLines(content []byte) []byte {
	lines := strings.SplitAfter(string(content), "\n")
	for i, line := range lines {
		for _, m := range keyOnLine.FindAllStringSubmatchIndex(line, -1) {
			key := line[m[2]:m[3]]
			if strings.HasSuffix(line[:m[0]], "${") {
				continue // the scheme of a reference, not a key
			}
			if j := strings.LastIndexByte(key, '.'); j >= 0 {
				key = key[j+1:] // a TOML dotted key
			}
			if IsCredentialKey(key) {
				if secretref.Contains(line[m[1]:]) {
					continue // a reference, shown as written
				}
				end := ""
				if strings.HasSuffix(line, "\n") {
					end = "\n"
				}
				lines[i] = line[:m[1]] + " " + Mask + end
				break
			}
		}
	}
	return []byte(strings.Join(lines, ""))
}
