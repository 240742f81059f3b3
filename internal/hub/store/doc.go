// Package store is the Hub's durable state on SQLite: desired state per
// resource, intents (operations), the outbox, attempts, nodes with their
// sessions, leases and reports, the event log, the audit log and
// Idempotency-Key outcomes.
//
// A write returns only after its transaction is on disk (WAL journal,
// synchronous=FULL); concurrent writes share one transaction and one fsync
// (group commit). The store must not call time.Now or make ids: callers
// pass both in. It knows no HTTP (an Idempotency-Key record is a status,
// header values and bytes in plain types) and makes no placement or
// reconciliation choice (the Hub passes its decisions in, such as
// JobWrite.Spread), and every table is bounded by Sweep.
package store
