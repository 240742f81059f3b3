-- PostgreSQL version of ../0013_config_contents.sql: the same table and
-- columns (TestMigrationParity).

-- Configuration contents numbered fleet-wide (see config.go): the Hub
-- gives one content one version id "v<seq>" on every node it is applied
-- to, so that node-a and node-b both run "v3" when they run the same text.
-- A content is its format and the SHA-256 of its text. config_versions
-- keeps a row per node that got it, with that seq; versions written before
-- this migration keep their per-node numbers (no row here), and new
-- contents are numbered past every number already used.
CREATE TABLE config_contents (
    seq        BIGINT PRIMARY KEY,
    format     TEXT COLLATE "C" NOT NULL,
    sha256     TEXT COLLATE "C" NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (format, sha256)
);
CREATE INDEX config_versions_seq ON config_versions (seq);
