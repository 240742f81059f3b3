package history

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/config"
)

// Sources of a version.
const (
	SourceFile     = "file"     // the --config file, through Boot
	SourceAPI      = "api"      // an apply through the Node API
	SourceRollback = "rollback" // the text of an earlier version, re-applied
	SourceHub      = "hub"      // a configuration_apply from the Hub, with its Hub version id
)

// Errors callers branch on.
var (
	// ErrNotFound: unknown or malformed version id, or no applied version.
	ErrNotFound = errors.New("configuration version not found")
	// ErrInvalid: an argument the store refuses (format, source, metadata).
	ErrInvalid = errors.New("invalid history request")
	// ErrTooLarge: content longer than config.MaxSize.
	ErrTooLarge = errors.New("configuration too large")
	// ErrCorrupt: the state directory does not hold a consistent history.
	// Open refuses it; the message names the file.
	ErrCorrupt = errors.New("configuration history is corrupt")
	// ErrStorage: a write failed. After a write that may have reached the
	// disk only partly, every later write fails with it until the store is
	// reopened.
	ErrStorage = errors.New("configuration history storage failed")
)

// maxIndexSize bounds index.json (about a million versions).
const maxIndexSize = 256 << 20

// Version is one configuration version. It is not a wire type.
type Version struct {
	ID             string        // "v1", "v2", ... per node, increasing
	Format         config.Format // yaml, json or toml
	Content        []byte        // the text as written, secret references kept; nil in List
	SHA256         string        // lower-case hex of Content
	Source         string        // SourceFile, SourceAPI, SourceRollback or SourceHub
	RolledBackFrom string        // for SourceRollback: the version whose text was re-applied
	HubVersion     string        // for SourceHub: the Hub's id of the version ("v3")
	CreatedAt      time.Time     // UTC
	Actor          string        // optional, from the API
	CorrelationID  string        // optional, from the API
}

// Meta is the metadata of a version appended through Append.
type Meta struct {
	Actor, CorrelationID string
	RolledBackFrom       string // required for SourceRollback, empty otherwise
	HubVersion           string // required for SourceHub, empty otherwise
}

// Store is a node's durable configuration history in one directory. It is
// safe for concurrent use; one process at a time may open a directory.
type Store struct {
	dir string
	now func() time.Time

	mu       sync.Mutex // guards the fields below and every file in dir
	versions []Version  // metadata only: Content is nil
	applied  string     // id of the applied version, "" before the first
	draft    *Draft
	broken   error // set by a write that may not be durable
}

// Open opens the history in dir (<state dir>/config), creating it if
// needed, and checks every file the index names. now stamps new versions.
func Open(dir string, now func() time.Time) (*Store, error) {
	if now == nil {
		return nil, fmt.Errorf("%w: nil clock", ErrInvalid)
	}
	vdir := filepath.Join(dir, versDir)
	if err := os.MkdirAll(vdir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: create %s: %w", ErrStorage, vdir, err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := syncDir(d); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	for _, d := range []string{dir, vdir} {
		if err := removeTemps(d); err != nil {
			return nil, fmt.Errorf("%w: remove temporary files in %s: %w", ErrStorage, d, err)
		}
	}
	s := &Store{dir: dir, now: now}
	if err := s.load(); err != nil {
		return nil, err
	}
	if err := s.loadDraft(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) load() error {
	path := filepath.Join(s.dir, indexName)
	data, err := readLimited(path, maxIndexSize)
	if errors.Is(err, fs.ErrNotExist) {
		if err := s.checkFresh(); err != nil {
			return err
		}
		if err := writeAtomic(s.dir, indexName, encodeIndex(nil, "")); err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", readKind(err), path, err)
	}
	vs, applied, err := decodeIndex(data)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	for _, v := range vs {
		if _, err := s.readVersion(v); err != nil {
			return err
		}
	}
	s.versions, s.applied = vs, applied
	return s.removeOrphans()
}

// checkFresh refuses to create an empty index beside existing files: a
// lost index.json must not silently reset the history.
func (s *Store) checkFresh() error {
	var found []string
	for _, d := range []string{s.dir, filepath.Join(s.dir, versDir)} {
		entries, err := os.ReadDir(d)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
		for _, e := range entries {
			if d == s.dir && e.Name() == versDir {
				continue
			}
			found = append(found, filepath.Join(d, e.Name()))
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: %s is missing but the directory holds %d files (%s); restore the index or move the directory away",
			ErrCorrupt, filepath.Join(s.dir, indexName), len(found), found[0])
	}
	return nil
}

// removeOrphans deletes version files numbered past the index: the text
// of an append that crashed before its index write.
func (s *Store) removeOrphans() error {
	vdir := filepath.Join(s.dir, versDir)
	entries, err := os.ReadDir(vdir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	removed := false
	for _, e := range entries {
		base, x, ok := strings.Cut(e.Name(), ".")
		n, isID := parseID(base)
		if !ok || !isID || n <= len(s.versions) || !e.Type().IsRegular() {
			continue
		}
		if _, err := config.ParseFormat(x); err != nil || x == "yml" {
			continue
		}
		if err := os.Remove(filepath.Join(vdir, e.Name())); err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
		removed = true
	}
	if removed {
		if err := syncDir(vdir); err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	return nil
}

// readVersion reads v's text and checks it against the index.
func (s *Store) readVersion(v Version) ([]byte, error) {
	path := filepath.Join(s.dir, versDir, versionFileName(v.ID, v.Format))
	data, err := readLimited(path, config.MaxSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s is missing (listed in %s)", ErrCorrupt, path, indexName)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", readKind(err), path, err)
	}
	if got := sum(data); got != v.SHA256 {
		return nil, fmt.Errorf("%w: %s has sha256 %s, %s records %s", ErrCorrupt, path, got, indexName, v.SHA256)
	}
	return data, nil
}

// Boot records the --config file read at start-up and returns the version
// to run. On the first boot the file becomes v1, applied. Later, a file
// whose text or format differs from the latest file version becomes a new
// applied version; an unchanged file returns the applied version, which
// may come from the API. path only labels errors and is not stored.
func (s *Store) Boot(content []byte, f config.Format, path string) (Version, bool, error) {
	f, err := checkFormat(f)
	if err != nil {
		return Version{}, false, fmt.Errorf("%s: %w", path, err)
	}
	if len(content) > config.MaxSize {
		return Version{}, false, fmt.Errorf("%w: %s is larger than %d bytes", ErrTooLarge, path, config.MaxSize)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return Version{}, false, err
	}
	for i := len(s.versions) - 1; i >= 0; i-- {
		last := s.versions[i]
		if last.Source != SourceFile {
			continue
		}
		if last.SHA256 != sum(content) || last.Format != f {
			break
		}
		if s.applied == "" { // versions were appended but none applied
			if err := s.setAppliedLocked(last.ID); err != nil {
				return Version{}, false, err
			}
		}
		v, err := s.getLocked(s.applied)
		return v, false, err
	}
	v, err := s.appendLocked(content, f, SourceFile, Meta{}, true)
	if err != nil {
		return Version{}, false, err
	}
	return v, true, nil
}

// Append adds a version that is not applied yet; MarkApplied applies it.
// source is SourceAPI, SourceRollback or SourceHub (file versions come
// from Boot).
func (s *Store) Append(content []byte, f config.Format, source string, meta Meta) (Version, error) {
	f, err := checkFormat(f)
	if err != nil {
		return Version{}, err
	}
	if len(content) > config.MaxSize {
		return Version{}, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(content), config.MaxSize)
	}
	if err := checkMeta(meta); err != nil {
		return Version{}, err
	}
	switch source {
	case SourceAPI, SourceHub:
		if meta.RolledBackFrom != "" {
			return Version{}, fmt.Errorf("%w: rolled-back-from on an %s version", ErrInvalid, source)
		}
	case SourceRollback:
	default:
		return Version{}, fmt.Errorf("%w: source %q; Append takes %q, %q or %q", ErrInvalid, source, SourceAPI, SourceRollback, SourceHub)
	}
	if err := checkHubVersion(source, meta.HubVersion); err != nil {
		return Version{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return Version{}, err
	}
	if source == SourceRollback {
		if n, ok := parseID(meta.RolledBackFrom); !ok || n > len(s.versions) {
			return Version{}, fmt.Errorf("%w: rollback from %q", ErrNotFound, meta.RolledBackFrom)
		}
	}
	return s.appendLocked(content, f, source, meta, false)
}

func (s *Store) appendLocked(content []byte, f config.Format, source string, meta Meta, apply bool) (Version, error) {
	v := Version{
		ID: versionID(len(s.versions) + 1), Format: f, Content: bytes.Clone(content), SHA256: sum(content),
		Source: source, RolledBackFrom: meta.RolledBackFrom, HubVersion: meta.HubVersion, CreatedAt: s.now().UTC(),
		Actor: meta.Actor, CorrelationID: meta.CorrelationID,
	}
	if v.Content == nil {
		v.Content = []byte{}
	}
	vdir := filepath.Join(s.dir, versDir)
	name := versionFileName(v.ID, f)
	if err := writeAtomic(vdir, name, content); err != nil {
		return Version{}, s.failed(err)
	}
	stored := v
	stored.Content = nil
	next := append(slices.Clip(s.versions), stored)
	applied := s.applied
	if apply {
		applied = v.ID
	}
	if err := writeAtomic(s.dir, indexName, encodeIndex(next, applied)); err != nil {
		if errors.Is(err, errUncertain) {
			s.versions, s.applied = next, applied
		} else {
			_ = os.Remove(filepath.Join(vdir, name))
		}
		return Version{}, s.failed(err)
	}
	s.versions, s.applied = next, applied
	return v, nil
}

// MarkApplied durably makes id the applied version.
func (s *Store) MarkApplied(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	if n, ok := parseID(id); !ok || n > len(s.versions) {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return s.setAppliedLocked(id)
}

func (s *Store) setAppliedLocked(id string) error {
	if s.applied == id {
		return nil
	}
	if err := writeAtomic(s.dir, indexName, encodeIndex(s.versions, id)); err != nil {
		if errors.Is(err, errUncertain) {
			s.applied = id
		}
		return s.failed(err)
	}
	s.applied = id
	return nil
}

// Applied returns the applied version with its text; ErrNotFound before
// the first Boot.
func (s *Store) Applied() (Version, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.applied == "" {
		return Version{}, fmt.Errorf("%w: no version is applied yet", ErrNotFound)
	}
	return s.getLocked(s.applied)
}

// Get returns a version with its text, read from disk and checked against
// its SHA256. Unknown and malformed ids are ErrNotFound.
func (s *Store) Get(id string) (Version, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.getLocked(id)
}

func (s *Store) getLocked(id string) (Version, error) {
	n, ok := parseID(id)
	if !ok || n > len(s.versions) {
		return Version{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	v := s.versions[n-1]
	data, err := s.readVersion(v)
	if err != nil {
		return Version{}, err
	}
	v.Content = data
	return v, nil
}

// List returns every version's metadata, oldest first; Content is nil
// (Get a version for its text). Callers page.
func (s *Store) List() []Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.versions)
}

// AppliedID returns the applied version's id, "" before the first Boot.
func (s *Store) AppliedID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// writable refuses writes after a write that may not be durable.
func (s *Store) writable() error {
	if s.broken != nil {
		return fmt.Errorf("%w: an earlier write may not be durable, reopen the history: %w", ErrStorage, s.broken)
	}
	return nil
}

// failed wraps a write error and remembers an uncertain one.
func (s *Store) failed(err error) error {
	if errors.Is(err, errUncertain) {
		s.broken = err
	}
	return fmt.Errorf("%w: %w", ErrStorage, err)
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
