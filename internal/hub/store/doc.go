// Package store is the Hub's durable state on SQLite (embedded, the
// default) or PostgreSQL, behind one contract: desired state per resource,
// intents (operations), the outbox, attempts, nodes with their sessions,
// leases and reports, the event log, the audit log and Idempotency-Key
// outcomes.
//
// A write returns only after its transaction is durable (SQLite: WAL
// journal, synchronous=FULL; PostgreSQL: its commit); concurrent writes
// share one transaction and one fsync (group commit). Statements are
// written once, for SQLite; dialect rewrites them for PostgreSQL, and the
// contract tests run on both. The store must not call time.Now or make ids: callers
// pass both in. It knows no HTTP (an Idempotency-Key record is a status,
// header values and bytes in plain types) and makes no placement or
// reconciliation choice (the Hub passes its decisions in, such as
// JobWrite.Spread), and every table is bounded by Sweep.
package store
