-- Configuration from the Hub and rollouts (see config.go). Times are Unix
-- milliseconds UTC; 0 means "none".

-- A node's configuration is a resources row of kind 'configuration': the
-- kind CHECK is widened by rebuilding the table (SQLite cannot alter a
-- CHECK). resources has no index beside its primary key. intents has no
-- CHECK on kinds.
CREATE TABLE resources_new (
    node_id        TEXT    NOT NULL,
    resource_kind  TEXT    NOT NULL CHECK (resource_kind IN ('stream', 'job', 'configuration')),
    resource_id    TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    config_version TEXT    NOT NULL DEFAULT '',
    generation     INTEGER NOT NULL,
    action_id      TEXT    NOT NULL DEFAULT '',
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (node_id, resource_kind, resource_id)
) WITHOUT ROWID;
INSERT INTO resources_new (node_id, resource_kind, resource_id, state, config_version, generation, action_id, updated_at)
    SELECT node_id, resource_kind, resource_id, state, config_version, generation, action_id, updated_at FROM resources;
DROP TABLE resources;
ALTER TABLE resources_new RENAME TO resources;

-- The configuration part of the node's last report that carried one
-- (wire.ReportConfiguration); config_reported_at 0: none yet.
ALTER TABLE nodes ADD COLUMN config_node_version TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN config_hub_version TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN config_generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN config_reported_at INTEGER NOT NULL DEFAULT 0;

-- Version "v<seq>" of a node's configuration, per node from 1. content is
-- the text as given, secret references kept: never a resolved value.
-- Never deleted (rollback deletes no record).
CREATE TABLE config_versions (
    node_id        TEXT    NOT NULL,
    seq            INTEGER NOT NULL,
    format         TEXT    NOT NULL,
    content        TEXT    NOT NULL,
    sha256         TEXT    NOT NULL,
    source         TEXT    NOT NULL,
    rollout_id     TEXT    NOT NULL DEFAULT '',
    actor          TEXT    NOT NULL DEFAULT '',
    correlation_id TEXT    NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (node_id, seq)
);

-- Rollouts and their nodes; never deleted.
CREATE TABLE rollouts (
    rollout_id      TEXT PRIMARY KEY,
    revision        INTEGER NOT NULL,
    state           TEXT    NOT NULL,
    format          TEXT    NOT NULL DEFAULT '',
    content         TEXT    NOT NULL DEFAULT '',
    config_version  TEXT    NOT NULL DEFAULT '',
    source_node_id  TEXT    NOT NULL DEFAULT '',
    sha256          TEXT    NOT NULL DEFAULT '',
    waves           TEXT    NOT NULL DEFAULT '[]', -- JSON array of arrays of node ids
    gate_timeout_ms INTEGER NOT NULL DEFAULT 0,
    soak_ms         INTEGER NOT NULL DEFAULT 0,
    pause_ms        INTEGER NOT NULL DEFAULT 0,
    max_failures    INTEGER NOT NULL DEFAULT 0,
    current_wave    INTEGER NOT NULL DEFAULT 0,
    wave_passed_at  INTEGER NOT NULL DEFAULT 0,
    failures        INTEGER NOT NULL DEFAULT 0,
    failure_code    TEXT    NOT NULL DEFAULT '',
    failure_message TEXT    NOT NULL DEFAULT '',
    actor           TEXT    NOT NULL DEFAULT '',
    correlation_id  TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    finished_at     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX rollouts_created ON rollouts (created_at);
CREATE INDEX rollouts_state ON rollouts (state, created_at);

CREATE TABLE rollout_nodes (
    rollout_id          TEXT    NOT NULL,
    node_id             TEXT    NOT NULL,
    wave                INTEGER NOT NULL,
    phase               TEXT    NOT NULL,
    version_before      TEXT    NOT NULL DEFAULT '',
    node_version_before TEXT    NOT NULL DEFAULT '',
    version_target      TEXT    NOT NULL DEFAULT '',
    generation          INTEGER NOT NULL DEFAULT 0,
    operation_id        TEXT    NOT NULL DEFAULT '',
    applied_at          INTEGER NOT NULL DEFAULT 0,
    healthy_since       INTEGER NOT NULL DEFAULT 0,
    failure_code        TEXT    NOT NULL DEFAULT '',
    failure_message     TEXT    NOT NULL DEFAULT '',
    updated_at          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (rollout_id, node_id)
) WITHOUT ROWID;
