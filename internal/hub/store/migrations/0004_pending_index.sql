-- Superseding looks up a resource's pending intents. The index it used
-- held the state of every intent, so every state change moved an entry
-- (a random page write per desired write); this one holds only the pending
-- intents, few and written close together.

DROP INDEX intents_resource;
CREATE INDEX intents_pending ON intents (node_id, resource_kind, resource_id) WHERE state = 'pending';
