// Package sqldb holds the sql input (a query, polled or run once, with a
// cursor column for incremental reads) and the sql output (batched insert
// or upsert, one transaction per batch) over PostgreSQL (pgx), MySQL
// (go-sql-driver) and SQLite (modernc).
//
// It must never put a value into SQL text (values are bind parameters,
// identifiers are quoted) nor let a password reach a log line or an error.
package sqldb
