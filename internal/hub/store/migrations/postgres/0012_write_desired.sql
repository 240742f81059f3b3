-- PostgreSQL version of ../0012_write_desired.sql.

-- write_desired is Store.WriteDesired's transaction body (desired.go) as one
-- call, so that a desired-state write costs the Hub one round trip instead
-- of nine while it holds the write lock: read the generation and check
-- If-Match (p_if_match, NULL without one), store the resource at generation + 1, supersede
-- the resource's pending intents and mark their outbox rows processed,
-- insert the pending intent, its outbox row, the audit row and the
-- intent_accepted event. On an If-Match mismatch it changes nothing and
-- answers o_conflict with the current generation. The Go code on SQLite
-- and this function must write the same rows (the store's contract tests
-- run on both backends).
CREATE FUNCTION write_desired(
    p_intent TEXT, p_operation TEXT, p_node TEXT, p_kind TEXT, p_resource TEXT,
    p_state TEXT, p_config_version TEXT, p_action TEXT,
    p_if_match BIGINT,
    p_correlation TEXT, p_actor TEXT, p_actor_kind TEXT, p_now BIGINT, p_expires BIGINT,
    OUT o_conflict BOOLEAN, OUT o_generation BIGINT, OUT o_superseded INTEGER, OUT o_seq BIGINT, OUT o_event BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    cur BIGINT;
    superseded TEXT[];
BEGIN
    SELECT r.generation INTO cur FROM resources r
        WHERE r.node_id = p_node AND r.resource_kind = p_kind AND r.resource_id = p_resource;
    cur := COALESCE(cur, 0);
    o_conflict := p_if_match IS NOT NULL AND p_if_match <> cur;
    o_generation := cur;
    o_superseded := 0;
    o_seq := 0;
    o_event := 0;
    IF o_conflict THEN
        RETURN;
    END IF;
    o_generation := cur + 1;
    INSERT INTO resources AS r (node_id, resource_kind, resource_id, state, config_version, generation, action_id, updated_at)
        VALUES (p_node, p_kind, p_resource, p_state, p_config_version, o_generation, p_action, p_now)
        ON CONFLICT (node_id, resource_kind, resource_id) DO UPDATE SET state = excluded.state,
            config_version = excluded.config_version, generation = excluded.generation,
            action_id = excluded.action_id, updated_at = excluded.updated_at;
    WITH s AS (
        UPDATE intents i SET state = 'superseded', updated_at = p_now, finished_at = p_now
            WHERE i.node_id = p_node AND i.resource_kind = p_kind AND i.resource_id = p_resource AND i.state = 'pending'
            RETURNING i.id)
    SELECT array_agg(s.id) INTO superseded FROM s;
    IF superseded IS NOT NULL THEN
        o_superseded := cardinality(superseded);
        UPDATE outbox o SET processed_at = p_now WHERE o.intent_id = ANY (superseded) AND o.processed_at IS NULL;
    END IF;
    INSERT INTO intents AS i (id, operation, node_id, resource_kind, resource_id, generation, desired_state, config_version,
            action_id, correlation_id, actor, actor_kind, state, created_at, updated_at, expires_at)
        VALUES (p_intent, p_operation, p_node, p_kind, p_resource, o_generation, p_state, p_config_version,
            p_action, p_correlation, p_actor, p_actor_kind, 'pending', p_now, p_now, p_expires)
        RETURNING i.seq INTO o_seq;
    INSERT INTO outbox (intent_id, node_id, created_at) VALUES (p_intent, p_node, p_now);
    INSERT INTO audit (occurred_at, actor, actor_kind, action, resource_type, resource_id, node_id, correlation_id, outcome)
        VALUES (p_now, p_actor, p_actor_kind, p_operation, p_kind, p_resource, p_node, p_correlation, 'accepted');
    INSERT INTO events AS e (kind, occurred_at, node_id, resource_id, operation_id, correlation_id, actor, actor_kind, outcome, data)
        VALUES ('intent_accepted', p_now, p_node, p_resource, p_intent, p_correlation, p_actor, p_actor_kind, 'accepted',
            -- The text Go's encoding/json gives the same data (keys sorted).
            '{"desired_state":' || to_json(p_state)::text || ',"generation":' || o_generation || '}')
        RETURNING e.id INTO o_event;
END
$$;
