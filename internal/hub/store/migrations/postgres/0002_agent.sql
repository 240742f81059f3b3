-- PostgreSQL version of ../0002_agent.sql: the same tables and columns (TestMigrationParity),
-- BIGINT for integers, BYTEA for blobs, identity columns for AUTOINCREMENT.

-- Agent protocol: what reports carry beyond stream states, and the probe
-- row the Hub rewrites to learn whether storage takes writes again.

ALTER TABLE observed_streams ADD COLUMN last_error_at BIGINT  NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN config_version TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN metrics TEXT COLLATE "C" NOT NULL DEFAULT '{}';
ALTER TABLE nodes ADD COLUMN restarts BIGINT  NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN lease_ttl_ms BIGINT  NOT NULL DEFAULT 15000;

CREATE TABLE probe (
    id BIGINT PRIMARY KEY CHECK (id = 1),
    at BIGINT  NOT NULL
);

CREATE INDEX intents_latest ON intents (node_id, resource_kind, resource_id, seq);
