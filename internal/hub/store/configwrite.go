package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/flowplane/flowplane/internal/wire"
)

// versionID is the id of configuration version seq.
func versionID(seq int64) string { return "v" + strconv.FormatInt(seq, 10) }

// versionSeq parses a version id "v<n>" (n >= 1, no leading zero).
func versionSeq(id string) (int64, bool) {
	num, ok := strings.CutPrefix(id, "v")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || strconv.FormatInt(n, 10) != num {
		return 0, false
	}
	return n, true
}

func (w ConfigWrite) check() error {
	if w.IntentID == "" || w.NodeID == "" || w.Now.IsZero() {
		return fmt.Errorf("%w: intent id, node id and now are required", ErrInvalid)
	}
	n := 0
	for _, v := range []string{w.Content, w.Version, w.NodeVersion} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%w: a configuration write needs exactly one of content, version and node version", ErrInvalid)
	}
	if w.Content != "" && w.Format == "" {
		return fmt.Errorf("%w: a configuration's content needs its format", ErrInvalid)
	}
	switch w.Source {
	case "", wire.ConfigSourceAPI, wire.ConfigSourceRollout:
	default:
		return fmt.Errorf("%w: configuration source %q", ErrInvalid, w.Source)
	}
	return nil
}

// WriteConfig commits w in one transaction: If-Match against the node's
// configuration generation, the content's fleet-wide version when Content
// is set (see insertConfigVersion; or a check that Version exists for the
// node or fleet-wide: ErrNotFound otherwise), the resources row
// (generation+1, state applied, config_version), superseding pending
// apply intents of the node's configuration, the intent (operation
// configuration_apply, kind configuration, resource_id configuration,
// config_version the Hub version, payload {"node_version": ...} for a
// NodeVersion write, else empty), the outbox row, an audit row (Action,
// accepted) and an intent_accepted event.
//
// Content is stored as given (secret references kept): the store never
// sees a resolved secret; the intent carries no content (the Hub reads the
// version's at dispatch). The node needs not be known.
func (s *Store) WriteConfig(ctx context.Context, w ConfigWrite) (ConfigWriteResult, error) {
	var res ConfigWriteResult
	if err := w.check(); err != nil {
		return res, err
	}
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		var err error
		res, err = writeConfig(ctx, q, w)
		return err
	})
	if err != nil {
		return ConfigWriteResult{}, err
	}
	return res, nil
}

// writeConfig is WriteConfig's transaction body; w is checked.
func writeConfig(ctx context.Context, q querier, w ConfigWrite) (ConfigWriteResult, error) {
	var res ConfigWriteResult
	var cur int64
	err := q.QueryRowContext(ctx, `SELECT generation FROM resources WHERE node_id = ? AND resource_kind = ? AND resource_id = ?`,
		w.NodeID, KindConfiguration, wire.ConfigResource).Scan(&cur)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return res, err
	}
	if w.IfMatch != nil && *w.IfMatch != cur {
		return res, &GenerationConflictError{Expected: *w.IfMatch, Current: cur}
	}
	res.Generation = cur + 1
	switch {
	case w.Content != "":
		if res.Version, err = insertConfigVersion(ctx, q, w); err != nil {
			return res, err
		}
	case w.Version != "":
		_, err := getConfigVersion(ctx, q, w.NodeID, w.Version)
		if errors.Is(err, ErrNotFound) {
			err = fleetConfigVersion(ctx, q, w)
		}
		if err != nil {
			return res, err
		}
		res.Version = w.Version
	}
	var payload json.RawMessage
	data := map[string]any{"generation": res.Generation, "desired_state": wire.ConfigApplied, "config_version": res.Version}
	if w.NodeVersion != "" {
		if payload, err = json.Marshal(wire.ConfigCommand{NodeVersion: w.NodeVersion}); err != nil {
			return res, err
		}
		data["node_version"] = w.NodeVersion
	}
	in := Intent{ID: w.IntentID, Operation: wire.CommandConfigApply, NodeID: w.NodeID, Kind: KindConfiguration,
		ResourceID: wire.ConfigResource, Generation: res.Generation, DesiredState: wire.ConfigApplied,
		ConfigVersion: res.Version, CorrelationID: w.CorrelationID, Actor: w.Actor, ActorKind: w.ActorKind, Payload: payload,
		CreatedAt: w.Now, ExpiresAt: w.ExpiresAt}
	if res.Intent, err = desire(ctx, q, in, data); err != nil {
		return res, err
	}
	action := w.Action
	if action == "" {
		action = wire.CommandConfigApply
	}
	msg := res.Version
	if w.NodeVersion != "" {
		msg = "node version " + w.NodeVersion
	}
	if _, err := insertAudit(ctx, q, AuditRecord{OccurredAt: wire.At(w.Now), Actor: w.Actor, ActorKind: w.ActorKind, Action: action,
		ResourceType: KindConfiguration, ResourceID: wire.ConfigResource, NodeID: w.NodeID, CorrelationID: w.CorrelationID,
		Outcome: OutcomeAccepted, Message: msg}); err != nil {
		return res, err
	}
	res.Txn = txnOf(q)
	return res, nil
}

// insertConfigVersion gives w's content its fleet-wide version (the one
// config_contents holds for its format and SHA-256, or the next number
// past every one used) and keeps the text for w's node unless the node
// has that version already. It returns the version's id.
func insertConfigVersion(ctx context.Context, q querier, w ConfigWrite) (string, error) {
	sum := sha256.Sum256([]byte(w.Content))
	hash := hex.EncodeToString(sum[:])
	var seq int64
	err := q.QueryRowContext(ctx, "SELECT seq FROM config_contents WHERE format = ? AND sha256 = ?", w.Format, hash).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		// Past the per-node numbers of versions older than config_contents
		// too, so that no node holds two texts under one id.
		err = q.QueryRowContext(ctx, `SELECT MAX(m) + 1 FROM (SELECT COALESCE(MAX(seq), 0) AS m FROM config_contents
			UNION ALL SELECT COALESCE(MAX(seq), 0) FROM config_versions) AS used`).Scan(&seq)
		if err != nil {
			return "", err
		}
		_, err = q.ExecContext(ctx, "INSERT INTO config_contents (seq, format, sha256, created_at) VALUES (?,?,?,?)",
			seq, w.Format, hash, ms(w.Now))
	}
	if err != nil {
		return "", err
	}
	return versionID(seq), keepConfigVersion(ctx, q, w, seq, w.Format, w.Content, hash)
}

// keepConfigVersion stores a text as version seq of w's node, unless the
// node has that version already (the same content applied again keeps
// its version; the intent and the audit record each apply).
func keepConfigVersion(ctx context.Context, q querier, w ConfigWrite, seq int64, format, content, hash string) error {
	var one int
	err := q.QueryRowContext(ctx, "SELECT 1 FROM config_versions WHERE node_id = ? AND seq = ?", w.NodeID, seq).Scan(&one)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	source := w.Source
	if source == "" {
		source = wire.ConfigSourceAPI
	}
	_, err = q.ExecContext(ctx, `INSERT INTO config_versions (node_id, seq, format, content, sha256, source, rollout_id,
		actor, actor_kind, correlation_id, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)`, w.NodeID, seq, format, content,
		hash, source, w.RolloutID, w.Actor, w.ActorKind, w.CorrelationID, ms(w.Now))
	return err
}

// fleetConfigVersion makes the fleet-wide version id of another node
// one of w's node too: an apply by id of a version the Hub numbered
// fleet-wide (config_contents) that this node never had. Any other id
// the node does not have is ErrNotFound.
func fleetConfigVersion(ctx context.Context, q querier, w ConfigWrite) error {
	notFound := fmt.Errorf("configuration version %q of node %q: %w", w.Version, w.NodeID, ErrNotFound)
	seq, ok := versionSeq(w.Version)
	if !ok {
		return notFound
	}
	var format, content, hash string
	err := q.QueryRowContext(ctx, `SELECT v.format, v.content, v.sha256 FROM config_contents c JOIN config_versions v
		ON v.seq = c.seq AND v.format = c.format AND v.sha256 = c.sha256 WHERE c.seq = ? LIMIT 1`, seq).Scan(&format, &content, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound
	}
	if err != nil {
		return err
	}
	return keepConfigVersion(ctx, q, w, seq, format, content, hash)
}

// WriteConfigCommand commits an intent of kind KindConfigCommand
// (resource_id configuration; no resources row, nothing superseded), its
// outbox row, an audit row and an intent_accepted event.
func (s *Store) WriteConfigCommand(ctx context.Context, w ConfigCommandWrite) (Intent, error) {
	var out Intent
	if w.IntentID == "" || w.NodeID == "" || w.Now.IsZero() {
		return out, fmt.Errorf("%w: intent id, node id and now are required", ErrInvalid)
	}
	if w.Operation != wire.CommandConfigValidate && w.Operation != wire.CommandConfigDiff {
		return out, fmt.Errorf("%w: configuration command %q", ErrInvalid, w.Operation)
	}
	if err := checkJSON("payload", w.Payload); err != nil {
		return out, err
	}
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		in := Intent{ID: w.IntentID, Operation: w.Operation, NodeID: w.NodeID, Kind: KindConfigCommand,
			ResourceID: wire.ConfigResource, CorrelationID: w.CorrelationID, Actor: w.Actor, ActorKind: w.ActorKind, Payload: w.Payload,
			CreatedAt: w.Now, ExpiresAt: w.ExpiresAt}
		var err error
		if out, err = addIntent(ctx, q, in, map[string]any{"operation": w.Operation}); err != nil {
			return err
		}
		action := w.Action
		if action == "" {
			action = w.Operation
		}
		_, err = insertAudit(ctx, q, AuditRecord{OccurredAt: wire.At(w.Now), Actor: w.Actor, ActorKind: w.ActorKind, Action: action,
			ResourceType: KindConfiguration, ResourceID: wire.ConfigResource, NodeID: w.NodeID,
			CorrelationID: w.CorrelationID, Outcome: OutcomeAccepted})
		return err
	})
	if err != nil {
		return Intent{}, err
	}
	return out, nil
}
