package buffer

import (
	"slices"
	"strings"
)

// queryTables returns, lower case and in order of first appearance, the
// names a query reads as tables: each name after FROM or JOIN, and after
// the commas of a FROM list, that is not followed by "(" (a table-valued
// function) nor defined by the query's WITH (a common table expression).
// A join needs them to tell a table its session lacks from one the query
// does not read; it is a scan of tokens, not a parser, and errs towards
// fewer names (a name it misses only makes the query fail as SQLite says).
func queryTables(q string) []string {
	toks := sqlTokens(q)
	ctes := map[string]bool{}
	for i := 0; i+2 < len(toks); i++ {
		if toks[i].ident && toks[i+1].is("as") && toks[i+2].text == "(" {
			ctes[toks[i].lower()] = true
		}
	}
	var out []string
	add := func(t sqlToken) {
		n := t.lower()
		if n != "" && !ctes[n] && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for i := 0; i < len(toks); i++ {
		if !toks[i].is("from") && !toks[i].is("join") {
			continue
		}
		list := toks[i].is("from")
		for j := i + 1; j < len(toks) && toks[j].ident && !toks[j].keyword(); {
			if j+1 < len(toks) && toks[j+1].text == "(" {
				break // a function
			}
			add(toks[j])
			j++
			if !list {
				break
			}
			// Skip an alias ([AS] name), then continue after a comma.
			if j < len(toks) && toks[j].is("as") {
				j++
			}
			if j < len(toks) && toks[j].ident && !toks[j].keyword() {
				j++
			}
			if j >= len(toks) || toks[j].text != "," {
				break
			}
			j++
		}
	}
	return out
}

// sqlToken is an identifier (bare or quoted) or one punctuation character.
// Literals and comments are dropped.
type sqlToken struct {
	text   string
	ident  bool
	quoted bool
}

func (t sqlToken) lower() string { return strings.ToLower(t.text) }

// is reports whether t is the bare keyword kw (lower case).
func (t sqlToken) is(kw string) bool { return t.ident && !t.quoted && strings.EqualFold(t.text, kw) }

// sqlKeywords are the bare words that may follow FROM or a table name and
// are not names.
var sqlKeywords = []string{"select", "where", "group", "order", "limit", "having", "join", "inner", "left",
	"right", "full", "cross", "outer", "natural", "on", "using", "union", "except", "intersect", "window", "as",
	"lateral", "values"}

func (t sqlToken) keyword() bool {
	return t.ident && !t.quoted && slices.Contains(sqlKeywords, strings.ToLower(t.text))
}

func sqlTokens(q string) []sqlToken {
	var out []sqlToken
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '-' && strings.HasPrefix(q[i:], "--"):
			if j := strings.IndexByte(q[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(q)
			}
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			if j := strings.Index(q[i+2:], "*/"); j >= 0 {
				i += j + 4
			} else {
				i = len(q)
			}
		case c == '\'':
			i = skipQuoted(q, i, '\'')
		case c == '"' || c == '`' || c == '[':
			end := byte(c)
			if c == '[' {
				end = ']'
			}
			j := skipQuoted(q, i, end)
			name := q[i+1 : max(i+1, j-1)]
			if end != ']' {
				name = strings.ReplaceAll(name, string([]byte{end, end}), string(end))
			}
			out = append(out, sqlToken{text: name, ident: true, quoted: true})
			i = j
		case isIdentByte(c):
			j := i
			for j < len(q) && (isIdentByte(q[j]) || q[j] == '.') {
				j++
			}
			out = append(out, sqlToken{text: q[i:j], ident: !isDigit(c)})
			i = j
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		default:
			out = append(out, sqlToken{text: string(c)})
			i++
		}
	}
	return out
}

// skipQuoted returns the index after the quoted text starting at q[i],
// whose closing quote is end (doubled, it stands for itself).
func skipQuoted(q string, i int, end byte) int {
	for j := i + 1; j < len(q); j++ {
		if q[j] == end {
			if end != ']' && j+1 < len(q) && q[j+1] == end {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(q)
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c >= 0x80
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
