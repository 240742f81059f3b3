package store

import (
	"slices"
	"strconv"
	"strings"
	"sync"
)

// dialect is what the store's SQL needs of its backend. Statements are
// written once, in the SQLite flavour; on PostgreSQL each text is rewritten
// once (text) and the rewrite is cached by text. The few statements that
// cannot be rewritten mechanically are in pgFragments or branch on
// postgres explicitly.
type dialect struct {
	postgres bool
	texts    sync.Map // SQLite text -> PostgreSQL text
}

// writeLockKey is the PostgreSQL advisory lock every write transaction
// takes first: the write transactions of all Hubs on one database run one
// at a time, as SQLite's BEGIN IMMEDIATE makes them, so that the
// read-modify-write of generations and idempotency claims stays correct
// across Hubs. Its value is "flowplan" in ASCII.
const writeLockKey = 0x666c6f77706c616e

// begin is the statements that start a write transaction. On PostgreSQL
// it is one text of two statements, sent in one round trip (pgx runs a
// text without arguments through the simple protocol); it must not be
// prepared.
func (d *dialect) begin() []string {
	if d.postgres {
		return []string{"BEGIN; SELECT pg_advisory_xact_lock(" + strconv.FormatInt(writeLockKey, 10) + ")"}
	}
	return []string{"BEGIN IMMEDIATE"}
}

// pgFragments are the SQLite-only parts of statements with their
// PostgreSQL equivalents, replaced before the placeholders are numbered.
var pgFragments = []struct{ sqlite, postgres string }{
	// A JSON array of strings as a one-column table "value".
	{"json_each(?)", "json_array_elements_text(?::json)"},
	// The values of a JSON object (a split job's task -> node map).
	{"json_each(CASE WHEN jobs.task_nodes = '' THEN '{}' ELSE jobs.task_nodes END) AS t",
		"json_each_text(CASE WHEN jobs.task_nodes = '' THEN '{}' ELSE jobs.task_nodes END::json) AS t"},
	// The newest event id ever assigned. PostgreSQL sequences are not
	// transactional, so a snapshot would see ids of transactions still
	// open; retention keeps the newest events, so the newest row's id is
	// the newest id assigned.
	{"(SELECT seq FROM sqlite_sequence WHERE name = 'events')", "(SELECT MAX(id) FROM events)"},
}

// text returns query as the backend runs it.
func (d *dialect) text(query string) string {
	if !d.postgres {
		return query
	}
	if t, ok := d.texts.Load(query); ok {
		return t.(string)
	}
	t := pgText(query)
	d.texts.Store(query, t)
	return t
}

// pgText rewrites a SQLite statement for PostgreSQL: the fragments of
// pgFragments, then the placeholders ? numbered $1, $2, ... outside string
// literals and quoted names.
func pgText(query string) string {
	for _, f := range pgFragments {
		query = strings.ReplaceAll(query, f.sqlite, f.postgres)
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	var quote byte // the quote of the literal or name being read, or 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0 // a doubled quote reopens at the next character
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?' && i+1 < len(query) && query[i+1] >= '0' && query[i+1] <= '9':
			b.WriteByte('$') // ?NNN: SQLite's numbered parameter is PostgreSQL's $NNN
			continue
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// args converts arguments the SQLite driver takes and pgx does not: a
// bool is stored as the integer 0 or 1 in both schemas.
func (d *dialect) args(args []any) []any {
	if !d.postgres {
		return args
	}
	copied := false
	for i, a := range args {
		if v, ok := a.(bool); ok {
			if !copied {
				args, copied = slices.Clone(args), true // the caller's slice stays as it was
			}
			args[i] = int64(0)
			if v {
				args[i] = int64(1)
			}
		}
	}
	return args
}
