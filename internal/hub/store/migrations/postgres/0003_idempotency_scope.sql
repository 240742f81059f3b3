-- PostgreSQL version of ../0003_idempotency_scope.sql: the same tables and columns (TestMigrationParity),
-- BIGINT for integers, BYTEA for blobs, identity columns for AUTOINCREMENT.

-- Idempotency keys are scoped by principal, resource (method and path) and
-- request body: the same key on another resource is another request.
-- Rows kept before this version have no resource; they keep resource '' (no
-- request matches it) until the retention sweep drops them after 24 h.
-- Rows of Agent principals are dropped: agent routes take no key any more,
-- and a stored agent/register answer holds a session token.

CREATE TABLE idempotency_scoped (
    principal   TEXT COLLATE "C" NOT NULL,
    resource    TEXT COLLATE "C" NOT NULL,
    key         TEXT COLLATE "C" NOT NULL,
    fingerprint TEXT COLLATE "C" NOT NULL,
    done        BIGINT  NOT NULL DEFAULT 0,
    status      BIGINT  NOT NULL DEFAULT 0,
    header      TEXT COLLATE "C" NOT NULL DEFAULT '{}',
    body        BYTEA,
    created_at  BIGINT  NOT NULL,
    PRIMARY KEY (principal, resource, key)
);

INSERT INTO idempotency_scoped (principal, resource, key, fingerprint, done, status, header, body, created_at)
    SELECT principal, '', key, fingerprint, done, status, header, body, created_at FROM idempotency
    WHERE principal <> 'node' AND principal NOT LIKE 'node:%';

DROP TABLE idempotency;
ALTER TABLE idempotency_scoped RENAME TO idempotency;
CREATE INDEX idempotency_time ON idempotency (created_at);
