-- Times are Unix milliseconds UTC; 0 means "none".

CREATE TABLE resources (
    node_id        TEXT    NOT NULL,
    resource_kind  TEXT    NOT NULL CHECK (resource_kind IN ('stream', 'job')),
    resource_id    TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    config_version TEXT    NOT NULL DEFAULT '',
    generation     INTEGER NOT NULL,
    action_id      TEXT    NOT NULL DEFAULT '',
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (node_id, resource_kind, resource_id)
) WITHOUT ROWID;

CREATE TABLE intents (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    operation       TEXT    NOT NULL,
    node_id         TEXT    NOT NULL,
    resource_kind   TEXT    NOT NULL,
    resource_id     TEXT    NOT NULL,
    generation      INTEGER NOT NULL,
    desired_state   TEXT    NOT NULL DEFAULT '',
    config_version  TEXT    NOT NULL DEFAULT '',
    action_id       TEXT    NOT NULL DEFAULT '',
    correlation_id  TEXT    NOT NULL DEFAULT '',
    actor           TEXT    NOT NULL DEFAULT '',
    state           TEXT    NOT NULL,
    attempt_id      TEXT    NOT NULL DEFAULT '',
    retry_count     INTEGER NOT NULL DEFAULT 0,
    failure_class   TEXT    NOT NULL DEFAULT '',
    failure_code    TEXT    NOT NULL DEFAULT '',
    failure_message TEXT    NOT NULL DEFAULT '',
    result          TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    dispatched_at   INTEGER NOT NULL DEFAULT 0,
    acknowledged_at INTEGER NOT NULL DEFAULT 0,
    finished_at     INTEGER NOT NULL DEFAULT 0,
    expires_at      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX intents_resource ON intents (node_id, resource_kind, resource_id, state);
CREATE INDEX intents_state ON intents (state, seq);

CREATE TABLE outbox (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    intent_id    TEXT    NOT NULL,
    node_id      TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    processed_at INTEGER           -- NULL while unprocessed
);
CREATE INDEX outbox_intent ON outbox (intent_id);
CREATE INDEX outbox_unprocessed ON outbox (seq) WHERE processed_at IS NULL;

CREATE TABLE attempts (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    intent_id       TEXT    NOT NULL,
    node_id         TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL DEFAULT 0,
    finished_at     INTEGER NOT NULL DEFAULT 0,
    failure_class   TEXT    NOT NULL DEFAULT '',
    failure_code    TEXT    NOT NULL DEFAULT '',
    failure_message TEXT    NOT NULL DEFAULT '',
    result          TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX attempts_intent ON attempts (intent_id);
CREATE INDEX attempts_active ON attempts (seq) WHERE state IN ('dispatched', 'acknowledged');

CREATE TABLE nodes (
    node_id            TEXT PRIMARY KEY,
    boot_id            TEXT    NOT NULL DEFAULT '',
    version            TEXT    NOT NULL DEFAULT '',
    protocol_version   INTEGER NOT NULL DEFAULT 0,
    capabilities       TEXT    NOT NULL DEFAULT '[]',
    data_address       TEXT    NOT NULL DEFAULT '',
    registered_at      INTEGER NOT NULL,
    lease_expires_at   INTEGER NOT NULL DEFAULT 0,
    mode               TEXT    NOT NULL DEFAULT 'active',
    session_hash       BLOB,
    session_expires_at INTEGER NOT NULL DEFAULT 0,
    report_boot_id     TEXT    NOT NULL DEFAULT '',
    report_seq         INTEGER NOT NULL DEFAULT 0,
    reported_at        INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE UNIQUE INDEX nodes_session ON nodes (session_hash);

CREATE TABLE observed_streams (
    node_id        TEXT    NOT NULL,
    stream_id      TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    generation     INTEGER NOT NULL,
    config_version TEXT    NOT NULL DEFAULT '',
    action_id      TEXT    NOT NULL DEFAULT '',
    last_error     TEXT    NOT NULL DEFAULT '',
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (node_id, stream_id)
) WITHOUT ROWID;

CREATE TABLE events (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    kind           TEXT    NOT NULL,
    occurred_at    INTEGER NOT NULL,
    node_id        TEXT    NOT NULL DEFAULT '',
    resource_id    TEXT    NOT NULL DEFAULT '',
    operation_id   TEXT    NOT NULL DEFAULT '',
    correlation_id TEXT    NOT NULL DEFAULT '',
    actor          TEXT    NOT NULL DEFAULT '',
    outcome        TEXT    NOT NULL DEFAULT '',
    message        TEXT    NOT NULL DEFAULT '',
    data           TEXT    NOT NULL DEFAULT ''
);

CREATE TABLE audit (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    occurred_at    INTEGER NOT NULL,
    actor          TEXT    NOT NULL DEFAULT '',
    action         TEXT    NOT NULL,
    resource_type  TEXT    NOT NULL DEFAULT '',
    resource_id    TEXT    NOT NULL DEFAULT '',
    node_id        TEXT    NOT NULL DEFAULT '',
    correlation_id TEXT    NOT NULL DEFAULT '',
    outcome        TEXT    NOT NULL,
    failure_code   TEXT    NOT NULL DEFAULT '',
    message        TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX audit_resource ON audit (resource_id, id);
CREATE INDEX audit_time ON audit (occurred_at);

CREATE TABLE idempotency (
    principal   TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL,
    done        INTEGER NOT NULL DEFAULT 0,
    status      INTEGER NOT NULL DEFAULT 0,
    header      TEXT    NOT NULL DEFAULT '{}',
    body        BLOB,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (principal, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_time ON idempotency (created_at);
