-- PostgreSQL version of ../0011_hub_lease.sql: the same table and columns (TestMigrationParity).

-- The leader lease of the Hubs sharing this database: one row. holder_id
-- is '' when no Hub holds it (never held, or released on a clean
-- shutdown). epoch only grows: every takeover adds one, a renewal keeps
-- it, and the leader's loop writes are fenced on it (store.WithEpoch).
-- expires_at is Unix milliseconds on the holder's clock.

CREATE TABLE hub_lease (
    id             BIGINT PRIMARY KEY CHECK (id = 1),
    holder_id      TEXT COLLATE "C" NOT NULL DEFAULT '',
    holder_address TEXT COLLATE "C" NOT NULL DEFAULT '',
    epoch          BIGINT NOT NULL DEFAULT 0,
    expires_at     BIGINT NOT NULL DEFAULT 0
);
INSERT INTO hub_lease (id) VALUES (1);
