-- PostgreSQL version of ../0004_pending_index.sql: the same tables and columns (TestMigrationParity),
-- BIGINT for integers, BYTEA for blobs, identity columns for AUTOINCREMENT.

-- Superseding looks up a resource's pending intents. The index it used
-- held the state of every intent, so every state change moved an entry
-- (a random page write per desired write); this one holds only the pending
-- intents, few and written close together.

DROP INDEX intents_resource;
CREATE INDEX intents_pending ON intents (node_id, resource_kind, resource_id) WHERE state = 'pending';
