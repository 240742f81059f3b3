package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flowplane/flowplane/internal/wire"
)

const configVersionCols = "node_id, seq, format, content, sha256, source, rollout_id, actor, actor_kind, correlation_id, created_at"

func scanConfigVersion(r scanner) (ConfigVersion, error) {
	var v ConfigVersion
	var seq, at int64
	if err := r.Scan(&v.NodeID, &seq, &v.Format, &v.Content, &v.SHA256, &v.Source, &v.RolloutID, &v.Actor, &v.ActorKind,
		&v.CorrelationID, &at); err != nil {
		return v, err
	}
	v.Version, v.CreatedAt = versionID(seq), tm(at)
	return v, nil
}

func getConfigVersion(ctx context.Context, q querier, nodeID, version string) (ConfigVersion, error) {
	seq, ok := versionSeq(version)
	if !ok {
		return ConfigVersion{}, fmt.Errorf("configuration version %q of node %q: %w", version, nodeID, ErrNotFound)
	}
	v, err := scanConfigVersion(q.QueryRowContext(ctx, "SELECT "+configVersionCols+` FROM config_versions
		WHERE node_id = ? AND seq = ?`, nodeID, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("configuration version %q of node %q: %w", version, nodeID, ErrNotFound)
	}
	return v, err
}

// GetConfigVersion returns one version of a node (ErrNotFound).
func (s *Store) GetConfigVersion(ctx context.Context, nodeID, version string) (ConfigVersion, error) {
	var v ConfigVersion
	err := s.read(ctx, func(q querier) error {
		var err error
		v, err = getConfigVersion(ctx, q, nodeID, version)
		return err
	})
	return v, err
}

// ConfigVersions pages a node's versions, newest first (an empty page for
// a node without any).
func (s *Store) ConfigVersions(ctx context.Context, nodeID string, p Paging) (wire.Page[ConfigVersion], error) {
	out := wire.Page[ConfigVersion]{Items: []ConfigVersion{}, Page: p.Page, PageSize: p.PageSize}
	if err := p.check(); err != nil {
		return out, err
	}
	err := s.readTx(ctx, func(q querier) error {
		if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM config_versions WHERE node_id = ?", nodeID).
			Scan(&out.Total); err != nil {
			return err
		}
		rows, err := q.QueryContext(ctx, "SELECT "+configVersionCols+` FROM config_versions WHERE node_id = ?
			ORDER BY seq DESC LIMIT ? OFFSET ?`, nodeID, p.PageSize, p.offset())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scanConfigVersion(rows)
			if err != nil {
				return err
			}
			out.Items = append(out.Items, v)
		}
		return rows.Err()
	})
	return out, err
}

// observedConfig is the stored configuration of a node's last report, nil
// when no report carried one (reportedAt 0).
func observedConfig(nodeVersion, hubVersion string, generation, reportedAt int64) *ObservedConfig {
	if reportedAt == 0 {
		return nil
	}
	return &ObservedConfig{ReportConfiguration: wire.ReportConfiguration{NodeVersion: nodeVersion, HubVersion: hubVersion,
		Generation: generation}, ReportedAt: tm(reportedAt)}
}

// NodeConfigs returns the configuration resource of each node of ids (all
// nodes when ids is nil), read in one transaction with three queries. A
// node is there when it is registered or has a configuration desired
// (WriteConfig needs no registered node); nodes never seen are absent.
func (s *Store) NodeConfigs(ctx context.Context, ids []string) (map[string]NodeConfig, error) {
	out := map[string]NodeConfig{}
	// in narrows a query to ids: "" for every node.
	in, args := "", []any{}
	if ids != nil {
		b, err := json.Marshal(ids)
		if err != nil {
			return nil, err
		}
		in, args = " AND node_id IN (SELECT value FROM json_each(?))", []any{string(b)}
	}
	err := s.readTx(ctx, func(q querier) error {
		clear(out)
		rows, err := q.QueryContext(ctx, `SELECT node_id, config_node_version, config_hub_version, config_generation,
			config_reported_at FROM nodes WHERE TRUE`+in, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, nv, hv string
			var gen, at int64
			if err := rows.Scan(&id, &nv, &hv, &gen, &at); err != nil {
				return err
			}
			out[id] = NodeConfig{NodeID: id, Observed: observedConfig(nv, hv, gen, at)}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rrows, err := q.QueryContext(ctx, `SELECT node_id, state, config_version, generation, action_id, updated_at
			FROM resources WHERE resource_kind = ? AND resource_id = ?`+in,
			append([]any{KindConfiguration, wire.ConfigResource}, args...)...)
		if err != nil {
			return err
		}
		defer rrows.Close()
		for rrows.Next() {
			r := Resource{Kind: KindConfiguration, ResourceID: wire.ConfigResource}
			var at int64
			if err := rrows.Scan(&r.NodeID, &r.State, &r.ConfigVersion, &r.Generation, &r.ActionID, &at); err != nil {
				return err
			}
			r.UpdatedAt = tm(at)
			nc := out[r.NodeID]
			nc.NodeID, nc.Desired = r.NodeID, &r
			out[r.NodeID] = nc
		}
		if err := rrows.Err(); err != nil {
			return err
		}
		irows, err := q.QueryContext(ctx, "SELECT "+intentCols+` FROM intents WHERE seq IN (SELECT MAX(seq) FROM intents
			WHERE resource_kind = ? AND resource_id = ?`+in+` GROUP BY node_id)`,
			append([]any{KindConfiguration, wire.ConfigResource}, args...)...)
		if err != nil {
			return err
		}
		defer irows.Close()
		for irows.Next() {
			i, err := scanIntent(irows)
			if err != nil {
				return err
			}
			if nc, ok := out[i.NodeID]; ok {
				nc.Latest = &i
				out[i.NodeID] = nc
			}
		}
		return irows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
