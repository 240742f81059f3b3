package sqlengine

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of Check and Query that callers may branch on.
var (
	// ErrNotReadOnly is a statement other than SELECT or WITH ... SELECT.
	ErrNotReadOnly = errors.New("only SELECT (or WITH ... SELECT) is allowed")
	// ErrMultiple is more than one statement.
	ErrMultiple = errors.New("only one statement is allowed")
)

type tokKind int

const (
	tokWord tokKind = iota
	tokString
	tokQuoted // a quoted identifier
	tokPunct
	tokSpace // spaces and comments
)

type token struct {
	kind tokKind
	text string
}

// tokenize splits SQL into tokens, keeping every byte so that joining the
// texts gives the input back. It understands string literals, quoted
// identifiers ("", “, []) and comments, enough to rewrite type names and
// to see statement boundaries without touching literals.
func tokenize(q string) ([]token, error) {
	var toks []token
	for i := 0; i < len(q); {
		c := q[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			for i < len(q) && strings.IndexByte(" \t\n\r\f", q[i]) >= 0 {
				i++
			}
			toks = append(toks, token{tokSpace, q[start:i]})
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			for i < len(q) && q[i] != '\n' {
				i++
			}
			toks = append(toks, token{tokSpace, q[start:i]})
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("unterminated comment at offset %d", start)
			}
			i += 2 + end + 2
			toks = append(toks, token{tokSpace, q[start:i]})
		case c == '\'' || c == '"' || c == '`' || c == '[':
			closer := c
			if c == '[' {
				closer = ']'
			}
			i++
			for {
				if i >= len(q) {
					return nil, fmt.Errorf("unterminated %c at offset %d", c, start)
				}
				if q[i] == closer {
					if closer != ']' && i+1 < len(q) && q[i+1] == closer {
						i += 2 // doubled quote
						continue
					}
					i++
					break
				}
				i++
			}
			kind := tokQuoted
			if c == '\'' {
				kind = tokString
			}
			toks = append(toks, token{kind, q[start:i]})
		case isWordByte(c):
			for i < len(q) && isWordByte(q[i]) {
				i++
			}
			toks = append(toks, token{tokWord, q[start:i]})
		default:
			i++
			toks = append(toks, token{tokPunct, q[start:i]})
		}
	}
	return toks, nil
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// castTypes maps DataFusion's type names in CAST to SQLite's.
var castTypes = map[string]string{
	"string": "TEXT", "utf8": "TEXT", "largeutf8": "TEXT", "varchar": "TEXT", "text": "TEXT", "char": "TEXT",
	"bigint": "INTEGER", "int": "INTEGER", "integer": "INTEGER", "smallint": "INTEGER", "tinyint": "INTEGER",
	"int8": "INTEGER", "int16": "INTEGER", "int32": "INTEGER", "int64": "INTEGER",
	"uint8": "INTEGER", "uint16": "INTEGER", "uint32": "INTEGER", "uint64": "INTEGER",
	"double": "REAL", "float": "REAL", "real": "REAL", "float4": "REAL", "float8": "REAL",
	"float32": "REAL", "float64": "REAL", "decimal": "REAL", "numeric": "REAL",
	"boolean": "INTEGER", "bool": "INTEGER",
	"binary": "BLOB", "bytea": "BLOB", "varbinary": "BLOB", "blob": "BLOB",
}

// translate checks that q is one read-only statement and rewrites
// DataFusion's CAST type names (and TRY_CAST) into SQLite's. String
// literals and identifiers are left alone.
func translate(q string) (string, error) {
	toks, err := tokenize(q)
	if err != nil {
		return "", err
	}
	// Statement shape: the first word is SELECT, WITH or VALUES; no word
	// of a data-changing statement at depth 0; nothing but spaces after a
	// semicolon.
	first := ""
	depth := 0
	ended := false
	afterClose := false // the previous token is ")" at depth 0
	for _, t := range toks {
		if t.kind == tokSpace {
			continue
		}
		if ended {
			if t.kind == tokPunct && t.text == ";" {
				continue
			}
			return "", ErrMultiple
		}
		switch {
		case t.kind == tokPunct && t.text == "(":
			depth++
		case t.kind == tokPunct && t.text == ")":
			depth--
		case t.kind == tokPunct && t.text == ";":
			ended = true
		case t.kind == tokWord:
			w := strings.ToUpper(t.text)
			if first == "" {
				first = w
				if w != "SELECT" && w != "WITH" && w != "VALUES" {
					return "", fmt.Errorf("%w, got %s", ErrNotReadOnly, t.text)
				}
			}
			if afterClose {
				// WITH x AS (...) DELETE ...
				switch w {
				case "INSERT", "UPDATE", "DELETE", "REPLACE":
					return "", fmt.Errorf("%w, got %s", ErrNotReadOnly, t.text)
				}
			}
		}
		afterClose = depth == 0 && t.kind == tokPunct && t.text == ")"
	}
	if first == "" {
		return "", errors.New("empty query")
	}

	// CAST(expr AS type): rewrite the type words after the AS at the
	// cast's own depth.
	type castFrame struct{ depth int }
	var casts []castFrame
	depth = 0
	var b strings.Builder
	b.Grow(len(q))
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.kind == tokPunct && t.text == "(":
			depth++
		case t.kind == tokPunct && t.text == ")":
			if n := len(casts); n > 0 && casts[n-1].depth == depth {
				casts = casts[:n-1]
			}
			depth--
		case t.kind == tokWord && (strings.EqualFold(t.text, "cast") || strings.EqualFold(t.text, "try_cast")):
			if j := nextNonSpace(toks, i+1); j >= 0 && toks[j].text == "(" {
				casts = append(casts, castFrame{depth: depth + 1})
				if strings.EqualFold(t.text, "try_cast") {
					t.text = "CAST"
				}
			}
		case t.kind == tokWord && strings.EqualFold(t.text, "as"):
			if n := len(casts); n > 0 && casts[n-1].depth == depth {
				if j := nextNonSpace(toks, i+1); j >= 0 && toks[j].kind == tokWord {
					if to, ok := castTypes[strings.ToLower(toks[j].text)]; ok {
						b.WriteString(t.text)
						for k := i + 1; k < j; k++ {
							b.WriteString(toks[k].text)
						}
						b.WriteString(to)
						i = j
						continue
					}
				}
			}
		}
		b.WriteString(t.text)
	}
	return b.String(), nil
}

func nextNonSpace(toks []token, i int) int {
	for ; i < len(toks); i++ {
		if toks[i].kind != tokSpace {
			return i
		}
	}
	return -1
}
