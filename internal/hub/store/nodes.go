package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// MaxReportStreams bounds the stream observations of one report, and so
// the observed streams the Hub keeps of one node (a report replaces them).
const MaxReportStreams = 1024

// Node is a registered node as stored.
type Node struct {
	NodeID           string
	BootID           string
	Version          string
	ProtocolVersion  int
	Capabilities     []string
	DataAddress      string
	DataFingerprint  string
	RegisteredAt     time.Time
	LeaseExpiresAt   time.Time
	Mode             string
	SessionExpiresAt time.Time
	ReportBootID     string
	ReportSeq        int64
	ReportedAt       time.Time
	ConfigVersion    string
	Metrics          map[string]float64
	// Restarts counts the reports that came with a new boot_id.
	Restarts int64
	LeaseTTL time.Duration
	// Config is the configuration of the last report that carried one
	// (nil when none did).
	Config *ObservedConfig
}

// Registration is one Agent register call. SessionToken is the raw
// credential the Hub issues; only its SHA-256 is stored.
type Registration struct {
	NodeID           string
	BootID           string
	Version          string
	ProtocolVersion  int
	Capabilities     []string
	DataAddress      string
	DataFingerprint  string
	SessionToken     string
	SessionExpiresAt time.Time
	LeaseExpiresAt   time.Time
	LeaseTTL         time.Duration
	// CredentialDigest is the SHA-256 of the node credential presented.
	// The first registration of a node id binds it; a later one with
	// another digest is refused with ErrIdentityMismatch.
	CredentialDigest []byte
	// SessionBinding is the digest of the registration credentials that
	// made the session, checked on every use (Session.Binding).
	SessionBinding []byte
	// Quiet: no node_registered event (the node spent its event budget).
	Quiet bool
	Now   time.Time
}

// RegisterNode creates or updates a node, replaces its session (the old
// token stops working) and renews its lease; the mode is kept. It appends
// a node_registered event. A node id bound to another credential digest
// is refused with ErrIdentityMismatch and nothing is written.
func (s *Store) RegisterNode(ctx context.Context, r Registration) error {
	if r.NodeID == "" || r.SessionToken == "" || len(r.CredentialDigest) == 0 {
		return fmt.Errorf("%w: node id, session token and credential digest are required", ErrInvalid)
	}
	caps, err := json.Marshal(nonNil(r.Capabilities))
	if err != nil {
		return err
	}
	h := hashToken(r.SessionToken)
	return s.write(ctx, func(ctx context.Context, q querier) error {
		var bound []byte
		err := q.QueryRowContext(ctx, "SELECT credential_digest FROM nodes WHERE node_id = ?", r.NodeID).Scan(&bound)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if len(bound) > 0 && subtle.ConstantTimeCompare(bound, r.CredentialDigest) != 1 {
			return fmt.Errorf("node %q: %w", r.NodeID, ErrIdentityMismatch)
		}
		now := ms(r.Now)
		if _, err := q.ExecContext(ctx, `INSERT INTO nodes (node_id, boot_id, version, protocol_version, capabilities,
			data_address, registered_at, lease_expires_at, session_hash, session_expires_at, lease_ttl_ms,
			credential_digest, session_binding, data_fingerprint) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)
			ON CONFLICT (node_id) DO UPDATE SET boot_id = excluded.boot_id, version = excluded.version,
			protocol_version = excluded.protocol_version, capabilities = excluded.capabilities,
			data_address = excluded.data_address, data_fingerprint = excluded.data_fingerprint, registered_at = excluded.registered_at,
			lease_expires_at = excluded.lease_expires_at, session_hash = excluded.session_hash,
			session_expires_at = excluded.session_expires_at, lease_ttl_ms = excluded.lease_ttl_ms,
			credential_digest = excluded.credential_digest, session_binding = excluded.session_binding`,
			r.NodeID, r.BootID, r.Version, r.ProtocolVersion, string(caps), r.DataAddress, now, ms(r.LeaseExpiresAt),
			h, ms(r.SessionExpiresAt), r.LeaseTTL.Milliseconds(), r.CredentialDigest, r.SessionBinding, r.DataFingerprint); err != nil {
			return err
		}
		note(q, ChangeNode, r.NodeID)
		if r.Quiet {
			return nil
		}
		e := event(wire.EventNodeRegistered, r.Now, r.NodeID, "", "", "", "", "", "", "")
		e.Data = map[string]any{"boot_id": r.BootID, "version": r.Version}
		_, err = insertEvent(ctx, q, e)
		return err
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Session is what a session credential resolves to.
type Session struct {
	NodeID    string
	ExpiresAt time.Time
	// Binding is the session's SessionBinding (nil for a session made
	// before node identity), CredentialDigest the node's bound credential
	// digest: the caller checks the binding against the credentials in
	// force.
	Binding          []byte
	CredentialDigest []byte
}

// LookupSession resolves a raw session token at now: ErrNotFound when no
// node holds it (never issued or replaced), ErrSessionExpired when past its
// expiry.
func (s *Store) LookupSession(ctx context.Context, token string, now time.Time) (Session, error) {
	var out Session
	err := s.read(ctx, func(q querier) error {
		var x int64
		err := q.QueryRowContext(ctx, `SELECT node_id, session_expires_at, session_binding, credential_digest
			FROM nodes WHERE session_hash = ?`, hashToken(token)).Scan(&out.NodeID, &x, &out.Binding, &out.CredentialDigest)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("session: %w", ErrNotFound)
		}
		if err != nil {
			return err
		}
		out.ExpiresAt = tm(x)
		if !now.Before(out.ExpiresAt) {
			return ErrSessionExpired
		}
		return nil
	})
	return out, err
}

// Heartbeat renews a node's lease and re-asserts its capabilities, data
// address and data-plane fingerprint. An unknown node returns ErrNotFound.
func (s *Store) Heartbeat(ctx context.Context, nodeID string, capabilities []string, dataAddress, dataFingerprint string, leaseExpiresAt time.Time) error {
	caps, err := json.Marshal(nonNil(capabilities))
	if err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, q querier) error {
		r, err := q.ExecContext(ctx, `UPDATE nodes SET lease_expires_at = ?, capabilities = ?, data_address = ?, data_fingerprint = ? WHERE node_id = ?`,
			ms(leaseExpiresAt), string(caps), dataAddress, dataFingerprint, nodeID)
		if err != nil {
			return err
		}
		note(q, ChangeNode, nodeID)
		return mustAffect(r, "node "+nodeID)
	})
}

func mustAffect(r sql.Result, what string) error {
	n, err := r.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return nil
}

// ModeChange is an operator's drain, maintenance entry or exit.
type ModeChange struct {
	NodeID        string
	Mode          string
	Actor         string
	ActorKind     string
	CorrelationID string
	Now           time.Time
}

// ModeAction is the audit action of a change to mode.
func ModeAction(mode string) string { return "node_mode_" + mode }

// SetNodeMode changes a node's mode with an audit row and a
// node_maintenance_changed event. Desired state is not touched.
func (s *Store) SetNodeMode(ctx context.Context, m ModeChange) error {
	if m.Mode != wire.NodeModeActive && m.Mode != wire.NodeModeDraining && m.Mode != wire.NodeModeMaintenance {
		return fmt.Errorf("%w: mode %q", ErrInvalid, m.Mode)
	}
	return s.write(ctx, func(ctx context.Context, q querier) error {
		var from string
		err := q.QueryRowContext(ctx, "SELECT mode FROM nodes WHERE node_id = ?", m.NodeID).Scan(&from)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("node %q: %w", m.NodeID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, "UPDATE nodes SET mode = ? WHERE node_id = ?", m.Mode, m.NodeID); err != nil {
			return err
		}
		note(q, ChangeNode, m.NodeID)
		if _, err := insertAudit(ctx, q, AuditRecord{OccurredAt: wire.At(m.Now), Actor: m.Actor, ActorKind: m.ActorKind, Action: ModeAction(m.Mode),
			ResourceType: "node", ResourceID: m.NodeID, NodeID: m.NodeID, CorrelationID: m.CorrelationID,
			Outcome: OutcomeAccepted}); err != nil {
			return err
		}
		e := event(wire.EventNodeMaintenanceChanged, m.Now, m.NodeID, m.NodeID, "", m.CorrelationID, m.Actor, m.ActorKind, OutcomeAccepted, "")
		e.Data = map[string]any{"from": from, "to": m.Mode}
		_, err = insertEvent(ctx, q, e)
		return err
	})
}

const nodeCols = `node_id, boot_id, version, protocol_version, capabilities, data_address, registered_at, lease_expires_at,
	mode, session_expires_at, report_boot_id, report_seq, reported_at, config_version, metrics, restarts, lease_ttl_ms,
	config_node_version, config_hub_version, config_generation, config_reported_at, data_fingerprint`

func scanNode(r scanner) (Node, error) {
	var n Node
	var caps, metrics, cnv, chv string
	var reg, lease, sx, rep, ttl, cgen, cat int64
	if err := r.Scan(&n.NodeID, &n.BootID, &n.Version, &n.ProtocolVersion, &caps, &n.DataAddress, &reg, &lease, &n.Mode,
		&sx, &n.ReportBootID, &n.ReportSeq, &rep, &n.ConfigVersion, &metrics, &n.Restarts, &ttl,
		&cnv, &chv, &cgen, &cat, &n.DataFingerprint); err != nil {
		return n, err
	}
	n.Config = observedConfig(cnv, chv, cgen, cat)
	n.LeaseTTL = time.Duration(ttl) * time.Millisecond
	if err := json.Unmarshal([]byte(caps), &n.Capabilities); err != nil {
		return n, fmt.Errorf("node %q capabilities: %w", n.NodeID, err)
	}
	if err := json.Unmarshal([]byte(metrics), &n.Metrics); err != nil {
		return n, fmt.Errorf("node %q metrics: %w", n.NodeID, err)
	}
	if len(n.Metrics) == 0 {
		n.Metrics = nil
	}
	n.RegisteredAt, n.LeaseExpiresAt, n.SessionExpiresAt, n.ReportedAt = tm(reg), tm(lease), tm(sx), tm(rep)
	return n, nil
}

// GetNode returns one node, or ErrNotFound.
func (s *Store) GetNode(ctx context.Context, nodeID string) (Node, error) {
	var n Node
	err := s.read(ctx, func(q querier) error {
		var err error
		n, err = scanNode(q.QueryRowContext(ctx, "SELECT "+nodeCols+" FROM nodes WHERE node_id = ?", nodeID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("node %q: %w", nodeID, ErrNotFound)
		}
		return err
	})
	return n, err
}

// Nodes returns every node, by id.
func (s *Store) Nodes(ctx context.Context) ([]Node, error) {
	var out []Node
	err := s.read(ctx, func(q querier) error {
		var err error
		out, err = allNodes(ctx, q)
		return err
	})
	return out, err
}

func allNodes(ctx context.Context, q querier) ([]Node, error) {
	rows, err := q.QueryContext(ctx, "SELECT "+nodeCols+" FROM nodes ORDER BY node_id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// ObservedStream is a node's latest observation of one stream.
type ObservedStream struct {
	StreamID      string
	State         string
	Generation    int64
	ConfigVersion string
	ActionID      string
	LastError     string
	LastErrorAt   time.Time
	UpdatedAt     time.Time
}

// MaxReportMetrics bounds the metrics of one report.
const MaxReportMetrics = 64

// Report is one Agent report, ordered by (BootID, Seq).
type Report struct {
	NodeID        string
	BootID        string
	Seq           int64
	Streams       []ObservedStream
	ConfigVersion string
	// Configuration is the report's configuration object (nil from Agents
	// of earlier releases: the stored one is then left as it was).
	Configuration *wire.ReportConfiguration
	Metrics       map[string]float64
	// Quiet: no node_restarted event (the node spent its event budget).
	Quiet bool
	Now   time.Time
}

// ReportResult says what ApplyReport did. Stale: the report was not newer
// and changed nothing. NewBoot: it came from another boot than the last
// accepted report (a node restart), counted in Node.Restarts and recorded
// as a node_restarted event.
type ReportResult struct {
	Stale   bool
	NewBoot bool
}

// ApplyReport stores r when it is newer than the node's last report (another
// boot_id, or a greater report_seq within the same boot): the node's
// observed streams are replaced by r.Streams, and its reported
// configuration by r.Configuration when not nil. A stale report changes
// nothing. An unknown node returns ErrNotFound.
func (s *Store) ApplyReport(ctx context.Context, r Report) (ReportResult, error) {
	var res ReportResult
	if len(r.Streams) > MaxReportStreams {
		return res, fmt.Errorf("%w: %d streams in one report (max %d)", ErrInvalid, len(r.Streams), MaxReportStreams)
	}
	if len(r.Metrics) > MaxReportMetrics {
		return res, fmt.Errorf("%w: %d metrics in one report (max %d)", ErrInvalid, len(r.Metrics), MaxReportMetrics)
	}
	metrics, err := json.Marshal(r.Metrics)
	if err != nil || r.Metrics == nil {
		metrics = []byte("{}")
	}
	err = s.write(ctx, func(ctx context.Context, q querier) error {
		res = ReportResult{}
		var boot string
		var seq int64
		err := q.QueryRowContext(ctx, "SELECT report_boot_id, report_seq FROM nodes WHERE node_id = ?", r.NodeID).Scan(&boot, &seq)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("node %q: %w", r.NodeID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if boot == r.BootID && r.Seq <= seq {
			res.Stale = true
			return nil
		}
		res.NewBoot = boot != "" && boot != r.BootID
		note(q, ChangeNode, r.NodeID)
		now := ms(r.Now)
		restarts := 0
		if res.NewBoot {
			restarts = 1
		}
		if _, err := q.ExecContext(ctx, `UPDATE nodes SET report_boot_id = ?, report_seq = ?, reported_at = ?, config_version = ?,
			metrics = ?, restarts = restarts + ? WHERE node_id = ?`,
			r.BootID, r.Seq, now, r.ConfigVersion, string(metrics), restarts, r.NodeID); err != nil {
			return err
		}
		if c := r.Configuration; c != nil {
			if _, err := q.ExecContext(ctx, `UPDATE nodes SET config_node_version = ?, config_hub_version = ?,
				config_generation = ?, config_reported_at = ? WHERE node_id = ?`,
				c.NodeVersion, c.HubVersion, c.Generation, now, r.NodeID); err != nil {
				return err
			}
		}
		if _, err := q.ExecContext(ctx, "DELETE FROM observed_streams WHERE node_id = ?", r.NodeID); err != nil {
			return err
		}
		for _, o := range r.Streams {
			if _, err := q.ExecContext(ctx, `INSERT INTO observed_streams (node_id, stream_id, state, generation,
				config_version, action_id, last_error, last_error_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?)
				ON CONFLICT (node_id, stream_id) DO UPDATE SET state = excluded.state, generation = excluded.generation,
				config_version = excluded.config_version, action_id = excluded.action_id, last_error = excluded.last_error,
				last_error_at = excluded.last_error_at, updated_at = excluded.updated_at`,
				r.NodeID, o.StreamID, o.State, o.Generation, o.ConfigVersion, o.ActionID, o.LastError, ms(o.LastErrorAt), now); err != nil {
				return err
			}
		}
		if res.NewBoot && !r.Quiet {
			e := event(wire.EventNodeRestarted, r.Now, r.NodeID, "", "", "", "", "", "", "node restarted")
			e.Data = map[string]any{"boot_id": r.BootID, "previous_boot_id": boot}
			if _, err := insertEvent(ctx, q, e); err != nil {
				return err
			}
		}
		return nil
	})
	return res, err
}

// ObservedStreams returns a node's observed streams by stream id.
func (s *Store) ObservedStreams(ctx context.Context, nodeID string) ([]ObservedStream, error) {
	var out []ObservedStream
	err := s.read(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, `SELECT stream_id, state, generation, config_version, action_id, last_error,
			last_error_at, updated_at FROM observed_streams WHERE node_id = ? ORDER BY stream_id`, nodeID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var o ObservedStream
			var le, u int64
			if err := rows.Scan(&o.StreamID, &o.State, &o.Generation, &o.ConfigVersion, &o.ActionID, &o.LastError, &le, &u); err != nil {
				return err
			}
			o.LastErrorAt, o.UpdatedAt = tm(le), tm(u)
			out = append(out, o)
		}
		return rows.Err()
	})
	return out, err
}
