-- PostgreSQL version of ../0009_data_fingerprint.sql: the same tables and columns (TestMigrationParity),
-- BIGINT for integers, BYTEA for blobs, identity columns for AUTOINCREMENT.

-- Data-plane TLS: each node advertises the SHA-256 of its data-plane
-- certificate with its data address, and a split job keeps each of its
-- nodes' fingerprints, captured at placement time as node_data_ports is,
-- for the job_start commands that pin them. Public values, not secrets.

ALTER TABLE nodes ADD COLUMN data_fingerprint TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN node_data_fingerprints TEXT COLLATE "C" NOT NULL DEFAULT ''; -- JSON {node id: sha256:hex}, '' when colocated or placed before
