-- Jobs on the Hub: the job resource with its versions, upgrades and
-- recovery artifacts, and the nodes' job observations. A job's desired
-- state is also a row of resources (kind job) at its current node; its
-- intents carry the command payload (spec, version, restore) in payload.
-- Times are Unix milliseconds UTC; 0 means "none".

ALTER TABLE intents ADD COLUMN payload TEXT NOT NULL DEFAULT '';

-- Job observations are ordered per node like reports, on their own.
ALTER TABLE nodes ADD COLUMN job_report_boot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN job_report_seq INTEGER NOT NULL DEFAULT 0;

CREATE TABLE jobs (
    job_id        TEXT PRIMARY KEY,
    node_id       TEXT    NOT NULL,
    strategy      TEXT    NOT NULL DEFAULT '',
    requested     TEXT    NOT NULL DEFAULT '[]', -- JSON array of node ids
    version       INTEGER NOT NULL,
    generation    INTEGER NOT NULL,
    desired_state TEXT    NOT NULL,
    action_id     TEXT    NOT NULL DEFAULT '',
    restore       TEXT    NOT NULL DEFAULT '',   -- JSON wire.JobRestore, '' for none
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE job_versions (
    job_id     TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    spec       TEXT    NOT NULL,
    plan       TEXT    NOT NULL DEFAULT '',
    upgrade_id TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, version)
) WITHOUT ROWID;

CREATE TABLE job_upgrades (
    upgrade_id     TEXT PRIMARY KEY,
    job_id         TEXT    NOT NULL,
    from_version   INTEGER NOT NULL,
    to_version     INTEGER NOT NULL,
    mode           TEXT    NOT NULL,
    strict         INTEGER NOT NULL DEFAULT 0,
    restore        TEXT    NOT NULL DEFAULT '', -- JSON wire.ArtifactRef, '' for none
    fallback       INTEGER NOT NULL DEFAULT 0,
    state          TEXT    NOT NULL,
    operation_id   TEXT    NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    rolled_back_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX job_upgrades_job ON job_upgrades (job_id, created_at);

CREATE TABLE job_artifacts (
    seq                INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id             TEXT    NOT NULL,
    kind               TEXT    NOT NULL CHECK (kind IN ('checkpoint', 'savepoint')),
    artifact_id        INTEGER NOT NULL DEFAULT 0, -- 0 while pending, and when failed
    job_version        INTEGER NOT NULL DEFAULT 0,
    format_version     INTEGER NOT NULL DEFAULT 0,
    max_parallelism    INTEGER NOT NULL DEFAULT 0,
    stateful_operators TEXT    NOT NULL DEFAULT '[]',
    location           TEXT    NOT NULL DEFAULT '',
    bytes              INTEGER NOT NULL DEFAULT 0,
    state              TEXT    NOT NULL CHECK (state IN ('pending', 'completed', 'failed')),
    trigger            TEXT    NOT NULL DEFAULT '',
    node_id            TEXT    NOT NULL DEFAULT '',
    operation_id       TEXT    NOT NULL DEFAULT '',
    failure            TEXT    NOT NULL DEFAULT '', -- JSON wire.Failure, '' for none
    created_at         INTEGER NOT NULL,
    completed_at       INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX job_artifacts_id ON job_artifacts (job_id, kind, artifact_id) WHERE artifact_id > 0;
CREATE INDEX job_artifacts_job ON job_artifacts (job_id, kind);
CREATE INDEX job_artifacts_operation ON job_artifacts (operation_id);

CREATE TABLE observed_jobs (
    node_id       TEXT    NOT NULL,
    job_id        TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    generation    INTEGER NOT NULL,
    version       INTEGER NOT NULL DEFAULT 0,
    action_id     TEXT    NOT NULL DEFAULT '',
    last_error    TEXT    NOT NULL DEFAULT '',
    last_error_at INTEGER NOT NULL DEFAULT 0,
    detail        TEXT    NOT NULL DEFAULT '', -- JSON wire.JobObservation
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (node_id, job_id)
) WITHOUT ROWID;
