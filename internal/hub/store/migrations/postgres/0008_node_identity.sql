-- PostgreSQL version of ../0008_node_identity.sql: the same tables and columns (TestMigrationParity),
-- BIGINT for integers, BYTEA for blobs, identity columns for AUTOINCREMENT.

-- Node identity (docs/node-identity.md). credential_digest is the SHA-256
-- of the node credential that first registered the node id (trust on first
-- use); NULL: none yet (a node registered before this migration binds at
-- its next registration). session_binding is the digest of the
-- registration credentials that made the current session (the shared node
-- token in force and the node credential); NULL sessions, made before this
-- migration, are refused and the Agent registers again.
ALTER TABLE nodes ADD COLUMN credential_digest BYTEA;
ALTER TABLE nodes ADD COLUMN session_binding BYTEA;
