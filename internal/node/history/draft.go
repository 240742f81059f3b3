package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/config"
)

// Draft is the node's one working draft: any text, valid or not.
type Draft struct {
	Format    config.Format
	Content   []byte // the text as written, secret references kept
	SHA256    string // lower-case hex of Content
	UpdatedAt time.Time
}

// SaveDraft durably replaces the draft; now stamps it.
func (s *Store) SaveDraft(content []byte, f config.Format, now time.Time) (Draft, error) {
	f, err := checkFormat(f)
	if err != nil {
		return Draft{}, err
	}
	if len(content) > config.MaxSize {
		return Draft{}, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(content), config.MaxSize)
	}
	d := Draft{Format: f, Content: bytes.Clone(content), SHA256: sum(content), UpdatedAt: now.UTC()}
	if d.Content == nil {
		d.Content = []byte{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return Draft{}, err
	}
	name := draftFileName(f, d.SHA256)
	var old string
	if s.draft != nil {
		old = draftFileName(s.draft.Format, s.draft.SHA256)
	}
	// Text first, under a name of its own; then the pointer. A crash in
	// between leaves the old draft whole and an orphan Open removes.
	if err := writeAtomic(s.dir, name, content); err != nil {
		return Draft{}, s.failed(err)
	}
	meta, err := json.Marshal(draftFile{Layout: layoutVersion, Format: string(f), SHA256: d.SHA256, UpdatedAt: d.UpdatedAt})
	if err != nil {
		return Draft{}, fmt.Errorf("encode draft: %w", err)
	}
	if err := writeAtomic(s.dir, draftName, append(meta, '\n')); err != nil {
		if errors.Is(err, errUncertain) {
			s.draft = &d
		} else if name != old {
			_ = os.Remove(filepath.Join(s.dir, name))
		}
		return Draft{}, s.failed(err)
	}
	s.draft = &d
	if old != "" && old != name {
		// A leftover is harmless: the next Open removes it.
		if err := os.Remove(filepath.Join(s.dir, old)); err == nil {
			_ = syncDir(s.dir)
		}
	}
	return cloneDraft(d), nil
}

// Draft returns the saved draft, if any.
func (s *Store) Draft() (Draft, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draft == nil {
		return Draft{}, false
	}
	return cloneDraft(*s.draft), true
}

func cloneDraft(d Draft) Draft {
	d.Content = bytes.Clone(d.Content)
	return d
}

// loadDraft reads draft.json and the text it names, and removes draft
// texts it does not name.
func (s *Store) loadDraft() error {
	path := filepath.Join(s.dir, draftName)
	data, err := readLimited(path, 64<<10)
	keep := ""
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%w: %s: %w", readKind(err), path, err)
	default:
		d, err := s.readDraft(data)
		if errors.Is(err, ErrStorage) {
			return err
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
		}
		s.draft = &d
		keep = draftFileName(d.Format, d.SHA256)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	removed := false
	for _, e := range entries {
		n := e.Name()
		if n == keep || !e.Type().IsRegular() || !strings.HasPrefix(n, "draft-") {
			continue
		}
		if x := filepath.Ext(n); x != ext(config.YAML) && x != ext(config.JSON) && x != ext(config.TOML) {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, n)); err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
		removed = true
	}
	if removed {
		if err := syncDir(s.dir); err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	return nil
}

func (s *Store) readDraft(data []byte) (Draft, error) {
	var df draftFile
	if err := json.Unmarshal(data, &df); err != nil {
		return Draft{}, fmt.Errorf("not valid JSON: %w", err)
	}
	if df.Layout != layoutVersion {
		return Draft{}, fmt.Errorf("layout %d is not the supported layout %d", df.Layout, layoutVersion)
	}
	f, err := checkFormat(config.Format(df.Format))
	if err != nil || string(f) != df.Format {
		return Draft{}, fmt.Errorf("format %q is not yaml, json or toml", df.Format)
	}
	if !isSHA256(df.SHA256) {
		return Draft{}, fmt.Errorf("sha256 %q is not 64 lower-case hex digits", df.SHA256)
	}
	text := filepath.Join(s.dir, draftFileName(f, df.SHA256))
	content, err := readLimited(text, config.MaxSize)
	if errors.Is(err, fs.ErrNotExist) {
		return Draft{}, fmt.Errorf("draft text %s is missing", text)
	}
	if errors.Is(err, errOversized) {
		return Draft{}, fmt.Errorf("draft text %s: %w", text, err)
	}
	if err != nil {
		return Draft{}, fmt.Errorf("%w: draft text %s: %w", ErrStorage, text, err)
	}
	if got := sum(content); got != df.SHA256 {
		return Draft{}, fmt.Errorf("draft text %s has sha256 %s, want %s", text, got, df.SHA256)
	}
	return Draft{Format: f, Content: content, SHA256: df.SHA256, UpdatedAt: df.UpdatedAt.UTC()}, nil
}
