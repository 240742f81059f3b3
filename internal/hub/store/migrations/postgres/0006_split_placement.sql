-- PostgreSQL version of ../0006_split_placement.sql: the same tables and columns (TestMigrationParity),
-- BIGINT for integers, BYTEA for blobs, identity columns for AUTOINCREMENT.

-- Split placement: a job's tasks over several nodes. placement is
-- colocated (every task on node_id, as before) or split; a split job keeps
-- its task -> node map and each node's data address as JSON objects, and
-- the secret its data-plane links authenticate with. The secret lives only
-- here: the Hub adds it to a job_start command when it dispatches one and
-- never writes it to intents, events, audit or views. node_id stays the
-- job's node: for a split job, its coordinator.

ALTER TABLE jobs ADD COLUMN placement TEXT COLLATE "C" NOT NULL DEFAULT 'colocated';
ALTER TABLE jobs ADD COLUMN task_nodes TEXT COLLATE "C" NOT NULL DEFAULT '';      -- JSON {task id: node id}, '' when colocated
ALTER TABLE jobs ADD COLUMN node_data_ports TEXT COLLATE "C" NOT NULL DEFAULT ''; -- JSON {node id: host:port}, '' when colocated
ALTER TABLE jobs ADD COLUMN data_secret TEXT COLLATE "C" NOT NULL DEFAULT '';     -- base64url of 32 random bytes, '' when colocated
