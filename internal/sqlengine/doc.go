// Package sqlengine runs read-only SQL over Arrow tables: the engine of
// the sql processor, of SQL expressions in ArkFlow's {type: expr} fields,
// and of the session_window join.
//
// It is SQLite, in memory, through modernc.org/sqlite (pure Go): each
// table is exposed to SQLite as a virtual table reading the Arrow columns
// in place, and results are built back into an Arrow table. Why SQLite
// and not DuckDB is measured in docs/decisions.md.
package sqlengine
