-- PostgreSQL version of ../0010_actor_kind.sql: the same tables and columns (TestMigrationParity).

-- The actor's kind beside its id: how the principal authenticated (token,
-- oidc, node, hub, anonymous; access.Kind). Rows written before keep ''
-- and read as before.

ALTER TABLE intents ADD COLUMN actor_kind TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN actor_kind TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN actor_kind TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE config_versions ADD COLUMN actor_kind TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE rollouts ADD COLUMN actor_kind TEXT COLLATE "C" NOT NULL DEFAULT '';
