// Package sqldb holds the sql input (a query, polled or run once, with a
// cursor column) and the sql output (batched insert or upsert) over
// PostgreSQL, MySQL and SQLite.
package sqldb
