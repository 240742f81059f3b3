-- Agent protocol: what reports carry beyond stream states, and the probe
-- row the Hub rewrites to learn whether storage takes writes again.

ALTER TABLE observed_streams ADD COLUMN last_error_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN config_version TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN metrics TEXT NOT NULL DEFAULT '{}';
ALTER TABLE nodes ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN lease_ttl_ms INTEGER NOT NULL DEFAULT 15000;

CREATE TABLE probe (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at INTEGER NOT NULL
);

CREATE INDEX intents_latest ON intents (node_id, resource_kind, resource_id, seq);
