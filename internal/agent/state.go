package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"github.com/flowplane/flowplane/internal/wire"
)

// maxOutcomes bounds the outcome cache: the last executed commands.
const maxOutcomes = 1024

// stateFileName is the Agent's durable state under <state dir>/agent.
const stateFileName = "hub-state.json"

// stateVersion is the version of the state file written. Versions 1 (no
// jobs), 2 (no split placements) and 3 (no configuration record) are read
// and migrated forward: they hold no Hub jobs, no split ones, and no
// configuration the Hub applied. A version 3 file is refused (moved
// aside) by an Agent that knows only version 2, which would otherwise
// start a split job whole; a version 4 file by one that knows only 3,
// which would not know which Hub configuration the node runs.
const stateVersion = 4

// Desire is the Hub desire the Agent last applied to one stream. Its
// generation and action id are what the Agent reports for the stream.
type Desire struct {
	State         string `json:"state"`
	Generation    int64  `json:"generation"`
	ConfigVersion string `json:"config_version,omitempty"`
	ActionID      string `json:"action_id,omitempty"`
	// CommandID is the command that set it; re-applying it at boot uses
	// it as the correlation id.
	CommandID string `json:"command_id,omitempty"`
}

// JobDesire is the Hub desire the Agent last applied to one Hub job: what
// it reports for the job and what it starts again at boot.
type JobDesire struct {
	State      string `json:"state"` // running or stopped
	Generation int64  `json:"generation"`
	Version    int    `json:"version"`
	ActionID   string `json:"action_id,omitempty"`
	// Spec is the job's specification as the Hub sent it (secret
	// references unresolved); absent for a stop of a job this node never
	// ran.
	Spec      json.RawMessage `json:"spec,omitempty"`
	CommandID string          `json:"command_id,omitempty"`

	// The split placement of a running job (job_start's task_nodes,
	// node_data_ports and data_secret; since version 3; and
	// node_data_fingerprints), absent for a colocated one. DataSecret is
	// base64url as the Hub sent it: a credential, kept only in this 0600
	// file, never logged or reported.
	TaskNodes            map[string]string `json:"task_nodes,omitempty"`
	NodeDataPorts        map[string]string `json:"node_data_ports,omitempty"`
	NodeDataFingerprints map[string]string `json:"node_data_fingerprints,omitempty"`
	DataSecret           string            `json:"data_secret,omitempty"`
}

// Outcome is the final result of one executed command, kept so that a
// redelivery is answered without running the command again.
type Outcome struct {
	CommandID string          `json:"command_id"`
	State     string          `json:"state"`
	Failure   *wire.Failure   `json:"failure,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// result is the outcome as the answer to one delivery attempt.
func (o Outcome) result(attemptID string) wire.CommandResult {
	return wire.CommandResult{AttemptID: attemptID, State: o.State, Failure: o.Failure, Result: o.Result}
}

// stateFile is the JSON form of the durable state.
type stateFile struct {
	Version int                  `json:"version"`
	NodeID  string               `json:"node_id"`
	Streams map[string]Desire    `json:"streams"`
	Jobs    map[string]JobDesire `json:"jobs,omitempty"` // since version 2; split placements since 3
	// Configuration is the last configuration_apply executed (since
	// version 4).
	Configuration *ConfigRecord `json:"configuration,omitempty"`
	Outcomes      []Outcome     `json:"outcomes"`
}

// ConfigRecord is what the last configuration_apply the Agent executed
// made: the node version that runs the Hub's version at the Hub's
// generation. It is written once the apply succeeded; reports carry
// HubVersion and Generation only while the node's applied version is
// NodeVersion.
type ConfigRecord struct {
	HubVersion  string `json:"hub_version,omitempty"` // empty for a re-apply of the node's own version
	Generation  int64  `json:"generation"`
	NodeVersion string `json:"node_version"`
	// CommandID is the command that made it; its outcome answers a
	// redelivery under another command id.
	CommandID string `json:"command_id,omitempty"`
}

// store holds the Agent's durable state: the Hub desire per stream and per
// Hub job, and the outcome cache. Every change is written through (tmp + fsync + rename)
// before the caller acts on it.
type store struct {
	path   string
	nodeID string

	mu       sync.Mutex // guards the fields below, the tables' maps and the file
	streams  desireTable[Desire]
	jobs     desireTable[JobDesire]
	config   *ConfigRecord
	outcomes []Outcome // oldest first, at most maxOutcomes
	byID     map[string]int
}

// desireTable is one kind of Hub desire the store keeps, by resource id:
// a stream's (Desire) or a Hub job's (JobDesire).
type desireTable[D any] struct {
	s *store
	m map[string]D // guarded by s.mu
}

// all returns a copy of every desire.
func (t desireTable[D]) all() map[string]D {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return maps.Clone(t.m)
}

// get returns one resource's desire, and whether it has one.
func (t desireTable[D]) get(id string) (D, bool) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	d, ok := t.m[id]
	return d, ok
}

// record keeps a command's outcome and, when the command changed the
// resource's desire (it succeeded), the new desire; then writes the
// state. The in-memory state changes even when the write fails
// (returned).
func (t desireTable[D]) record(o Outcome, id string, d *D) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.s.addLocked(o)
	if d != nil {
		t.m[id] = *d
	}
	return t.s.writeLocked()
}

// openStore reads the state kept in dir. A missing file is an empty state;
// an unreadable one, or one of another node id, is moved aside (logged) and
// the Agent starts empty: the Hub re-dispatches what it wants.
func openStore(dir, nodeID string, log *slog.Logger) (*store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent state directory: %w", err)
	}
	s := &store{path: filepath.Join(dir, stateFileName), nodeID: nodeID, byID: map[string]int{}}
	s.streams = desireTable[Desire]{s: s, m: map[string]Desire{}}
	s.jobs = desireTable[JobDesire]{s: s, m: map[string]JobDesire{}}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read agent state: %w", err)
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil || f.Version < 1 || f.Version > stateVersion || f.NodeID != nodeID {
		aside := s.path + ".discarded"
		log.Error("agent state is unreadable or belongs to another node id; starting without it", "file", aside, "err", err)
		if err := os.Rename(s.path, aside); err != nil {
			return nil, fmt.Errorf("move agent state aside: %w", err)
		}
		return s, nil
	}
	maps.Copy(s.streams.m, f.Streams)
	maps.Copy(s.jobs.m, f.Jobs)
	for _, o := range f.Outcomes {
		s.addLocked(o)
	}
	s.config = f.Configuration
	if f.Version < stateVersion {
		s.mu.Lock()
		err := s.writeLocked()
		s.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("migrate agent state from version %d: %w", f.Version, err)
		}
		log.Info("agent state migrated", "from_version", f.Version, "to_version", stateVersion)
	}
	return s, nil
}

// configuration returns the last configuration_apply's record, and
// whether there is one.
func (s *store) configuration() (ConfigRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.config == nil {
		return ConfigRecord{}, false
	}
	return *s.config, true
}

// recordConfig keeps a configuration command's outcome and, for an apply
// that succeeded, its record; then writes the state.
func (s *store) recordConfig(o Outcome, rec *ConfigRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(o)
	if rec != nil {
		r := *rec
		s.config = &r
	}
	return s.writeLocked()
}

func (s *store) outcome(commandID string) (Outcome, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.byID[commandID]
	if !ok {
		return Outcome{}, false
	}
	return s.outcomes[i], true
}

func (s *store) addLocked(o Outcome) {
	if i, ok := s.byID[o.CommandID]; ok {
		s.outcomes[i] = o
		return
	}
	if len(s.outcomes) >= maxOutcomes {
		drop := len(s.outcomes) - maxOutcomes + 1
		s.outcomes = append(s.outcomes[:0:0], s.outcomes[drop:]...)
		clear(s.byID)
		for i, x := range s.outcomes {
			s.byID[x.CommandID] = i
		}
	}
	s.byID[o.CommandID] = len(s.outcomes)
	s.outcomes = append(s.outcomes, o)
}

func (s *store) writeLocked() error {
	b, err := json.Marshal(stateFile{Version: stateVersion, NodeID: s.nodeID, Streams: s.streams.m, Jobs: s.jobs.m, Configuration: s.config, Outcomes: s.outcomes})
	if err != nil {
		return err
	}
	return writeFileSync(s.path, b)
}

// writeFileSync replaces path with data durably: a temporary file written
// and synced, renamed over path, then the directory synced.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write agent state: %w", err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write agent state: %w", werr)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write agent state: %w", err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write agent state: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write agent state: %w", err)
	}
	return nil
}
