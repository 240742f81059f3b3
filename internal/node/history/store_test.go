package history_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/node/history"
)

// clock is a fake clock that moves one second per reading.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func open(t *testing.T, dir string) *history.Store {
	t.Helper()
	s, err := history.Open(dir, newClock().Now)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func boot(t *testing.T, s *history.Store, content string) (history.Version, bool) {
	t.Helper()
	v, isNew, err := s.Boot([]byte(content), config.YAML, "/etc/flowplane/node.yaml")
	if err != nil {
		t.Fatalf("Boot: %v", err)
	}
	return v, isNew
}

func appendAPI(t *testing.T, s *history.Store, content string) history.Version {
	t.Helper()
	v, err := s.Append([]byte(content), config.YAML, history.SourceAPI, history.Meta{Actor: "alice", CorrelationID: "c-1"})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return v
}

func appliedID(t *testing.T, s *history.Store) string {
	t.Helper()
	v, err := s.Applied()
	if err != nil {
		t.Fatalf("Applied: %v", err)
	}
	return v.ID
}

const fileA = "streams: []\n# token: ${env:TOKEN}\n"

func TestFirstBoot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "config")
	s := open(t, dir)
	if _, err := s.Applied(); !errors.Is(err, history.ErrNotFound) {
		t.Fatalf("Applied before Boot: err = %v, want ErrNotFound", err)
	}
	v, isNew := boot(t, s, fileA)
	want := history.Version{
		ID: "v1", Format: config.YAML, Content: []byte(fileA),
		SHA256: sha(fileA), Source: history.SourceFile,
		CreatedAt: time.Date(2025, 3, 1, 12, 0, 1, 123456789, time.UTC),
	}
	if !isNew {
		t.Error("first Boot: new = false")
	}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("Boot (-want +got):\n%s", diff)
	}
	got, err := s.Applied()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Applied (-want +got):\n%s", diff)
	}
	text, err := os.ReadFile(filepath.Join(dir, "versions", "v1.yaml"))
	if err != nil || string(text) != fileA {
		t.Errorf("versions/v1.yaml = %q, %v; want the file text, references kept", text, err)
	}
	// Reopened, the same version comes back.
	got, err = open(t, dir).Applied()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Applied after reopen (-want +got):\n%s", diff)
	}
}

func TestBootAfterRestart(t *testing.T) {
	const fileB = "streams: []\nlogging: {level: debug}\n"
	tests := []struct {
		name    string
		setup   func(t *testing.T, s *history.Store) // after the first boot with fileA
		content string
		format  config.Format
		wantID  string
		wantNew bool
		wantLen int
	}{
		{name: "same file", content: fileA, format: config.YAML, wantID: "v1", wantLen: 1},
		{
			name: "same file keeps an applied api version",
			setup: func(t *testing.T, s *history.Store) {
				v := appendAPI(t, s, fileB)
				if err := s.MarkApplied(v.ID); err != nil {
					t.Fatal(err)
				}
			},
			content: fileA, format: config.YAML, wantID: "v2", wantLen: 2,
		},
		{
			name: "same file keeps the applied version, not the latest",
			setup: func(t *testing.T, s *history.Store) {
				appendAPI(t, s, fileB) // appended, never applied
			},
			content: fileA, format: config.YAML, wantID: "v1", wantLen: 2,
		},
		{name: "changed file", content: fileB, format: config.YAML, wantID: "v2", wantNew: true, wantLen: 2},
		{name: "same bytes, other format", content: fileA, format: config.JSON, wantID: "v2", wantNew: true, wantLen: 2},
		{
			name: "changed file wins over an applied api version",
			setup: func(t *testing.T, s *history.Store) {
				v := appendAPI(t, s, "streams: []\n# api\n")
				if err := s.MarkApplied(v.ID); err != nil {
					t.Fatal(err)
				}
			},
			content: fileB, format: config.YAML, wantID: "v3", wantNew: true, wantLen: 3,
		},
		{
			name: "file back to an older file version is a change",
			setup: func(t *testing.T, s *history.Store) {
				if _, isNew := boot(t, s, fileB); !isNew {
					t.Fatal("second file text not recorded")
				}
			},
			content: fileA, format: config.YAML, wantID: "v3", wantNew: true, wantLen: 3,
		},
		{
			name: "file equal to an api version is still a file change",
			setup: func(t *testing.T, s *history.Store) {
				v := appendAPI(t, s, fileB)
				if err := s.MarkApplied(v.ID); err != nil {
					t.Fatal(err)
				}
			},
			content: fileB, format: config.YAML, wantID: "v3", wantNew: true, wantLen: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir)
			boot(t, s, fileA)
			if tt.setup != nil {
				tt.setup(t, s)
			}
			s = open(t, dir) // restart
			v, isNew, err := s.Boot([]byte(tt.content), tt.format, "node.conf")
			if err != nil {
				t.Fatal(err)
			}
			if v.ID != tt.wantID || isNew != tt.wantNew {
				t.Errorf("Boot = %s, new %v; want %s, new %v", v.ID, isNew, tt.wantID, tt.wantNew)
			}
			if isNew && (v.Source != history.SourceFile || string(v.Content) != tt.content || v.Format != tt.format) {
				t.Errorf("new version = %+v, want the file's text as a file version", v)
			}
			if got := appliedID(t, s); got != tt.wantID {
				t.Errorf("applied = %s, want %s", got, tt.wantID)
			}
			if got := len(s.List()); got != tt.wantLen {
				t.Errorf("%d versions, want %d", got, tt.wantLen)
			}
			// The applied pointer is durable.
			if got := appliedID(t, open(t, dir)); got != tt.wantID {
				t.Errorf("applied after reopen = %s, want %s", got, tt.wantID)
			}
		})
	}
}

func TestAppendMarkAppliedGetList(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	boot(t, s, fileA)
	v2 := appendAPI(t, s, "streams: []\n# two\n")
	if got := appliedID(t, s); got != "v1" {
		t.Fatalf("Append applied its version: applied = %s", got)
	}
	v3, err := s.Append([]byte(fileA), "yml", history.SourceRollback, history.Meta{RolledBackFrom: "v1", Actor: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if v3.ID != "v3" || v3.Format != config.YAML || v3.RolledBackFrom != "v1" || v3.Source != history.SourceRollback {
		t.Errorf("rollback version = %+v", v3)
	}
	v4, err := s.Append([]byte(`{"streams": []}`), config.JSON, history.SourceAPI, history.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkApplied("v2"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkApplied("v2"); err != nil {
		t.Fatalf("MarkApplied twice: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "versions", "v4.json")); err != nil {
		t.Errorf("json version stored under another name: %v", err)
	}

	for _, s := range []*history.Store{s, open(t, dir)} {
		for _, want := range []history.Version{v2, v3, v4} {
			got, err := s.Get(want.ID)
			if err != nil {
				t.Fatalf("Get(%s): %v", want.ID, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Get(%s) (-want +got):\n%s", want.ID, diff)
			}
		}
		list := s.List()
		var ids []string
		for _, v := range list {
			ids = append(ids, v.ID)
			if v.Content != nil {
				t.Errorf("List returned the text of %s", v.ID)
			}
		}
		if diff := cmp.Diff([]string{"v1", "v2", "v3", "v4"}, ids); diff != "" {
			t.Errorf("List ids (-want +got):\n%s", diff)
		}
		want := v2
		want.Content = nil
		if diff := cmp.Diff(want, list[1]); diff != "" {
			t.Errorf("List()[1] (-want +got):\n%s", diff)
		}
		if got := appliedID(t, s); got != "v2" {
			t.Errorf("applied = %s, want v2", got)
		}
	}
}

func TestAppendRefuses(t *testing.T) {
	s := open(t, t.TempDir())
	boot(t, s, fileA)
	big := bytes.Repeat([]byte("#"), config.MaxSize+1)
	tests := []struct {
		name    string
		content []byte
		format  config.Format
		source  string
		meta    history.Meta
		want    error
	}{
		{"too large", big, config.YAML, history.SourceAPI, history.Meta{}, history.ErrTooLarge},
		{"unknown format", []byte("x"), "xml", history.SourceAPI, history.Meta{}, history.ErrInvalid},
		{"file source", []byte("x"), config.YAML, history.SourceFile, history.Meta{}, history.ErrInvalid},
		{"unknown source", []byte("x"), config.YAML, "cli", history.Meta{}, history.ErrInvalid},
		{"api with rolled back from", []byte("x"), config.YAML, history.SourceAPI, history.Meta{RolledBackFrom: "v1"}, history.ErrInvalid},
		{"rollback from unknown", []byte("x"), config.YAML, history.SourceRollback, history.Meta{RolledBackFrom: "v7"}, history.ErrNotFound},
		{"rollback from nothing", []byte("x"), config.YAML, history.SourceRollback, history.Meta{}, history.ErrNotFound},
		{"long actor", []byte("x"), config.YAML, history.SourceAPI, history.Meta{Actor: strings.Repeat("a", 1025)}, history.ErrInvalid},
		{"invalid utf-8", []byte("x"), config.YAML, history.SourceAPI, history.Meta{CorrelationID: "\xff"}, history.ErrInvalid},
		{"hub without hub version", []byte("x"), config.YAML, history.SourceHub, history.Meta{}, history.ErrInvalid},
		{"hub with bad hub version", []byte("x"), config.YAML, history.SourceHub, history.Meta{HubVersion: "3"}, history.ErrInvalid},
		{"hub with rolled back from", []byte("x"), config.YAML, history.SourceHub, history.Meta{HubVersion: "v3", RolledBackFrom: "v1"}, history.ErrInvalid},
		{"api with hub version", []byte("x"), config.YAML, history.SourceAPI, history.Meta{HubVersion: "v3"}, history.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Append(tt.content, tt.format, tt.source, tt.meta)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Append: err = %v, want %v", err, tt.want)
			}
		})
	}
	if _, _, err := s.Boot(big, config.YAML, "big.yaml"); !errors.Is(err, history.ErrTooLarge) || !strings.Contains(err.Error(), "big.yaml") {
		t.Errorf("Boot of a large file: err = %v, want ErrTooLarge naming the file", err)
	}
	if _, err := s.SaveDraft(big, config.YAML, time.Now()); !errors.Is(err, history.ErrTooLarge) {
		t.Errorf("SaveDraft of a large text: err = %v, want ErrTooLarge", err)
	}
	if n := len(s.List()); n != 1 {
		t.Errorf("refused appends left %d versions, want 1", n)
	}
	// Exactly MaxSize is accepted.
	if _, err := s.Append(big[:config.MaxSize], config.YAML, history.SourceAPI, history.Meta{}); err != nil {
		t.Errorf("Append of MaxSize bytes: %v", err)
	}
}

// TestHubVersion: a version from the Hub keeps its Hub id across a
// reopen, and an index written before hub versions existed still opens.
func TestHubVersion(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	boot(t, s, fileA)
	v, err := s.Append([]byte("streams: []\n"), config.YAML, history.SourceHub, history.Meta{Actor: "hub", HubVersion: "v12"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkApplied(v.ID); err != nil {
		t.Fatal(err)
	}
	if v.Source != history.SourceHub || v.HubVersion != "v12" {
		t.Fatalf("Append: source %q hub version %q, want hub v12", v.Source, v.HubVersion)
	}
	idx, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(idx, []byte(`"hub_version"`)); n != 1 {
		t.Errorf("index.json holds hub_version %d times, want once (omitted when empty):\n%s", n, idx)
	}
	s2 := open(t, dir)
	got, err := s2.Applied()
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != v.ID || got.Source != history.SourceHub || got.HubVersion != "v12" {
		t.Errorf("after reopen: applied %s source %q hub version %q, want %s hub v12", got.ID, got.Source, got.HubVersion, v.ID)
	}
	if l := s2.List(); l[0].HubVersion != "" || l[1].HubVersion != "v12" {
		t.Errorf("List: hub versions %q, %q; want \"\", v12", l[0].HubVersion, l[1].HubVersion)
	}
}

// TestOldIndexOpens: an index.json of an earlier release (no hub_version
// field anywhere) is read as it is.
func TestOldIndexOpens(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "versions"), 0o700); err != nil {
		t.Fatal(err)
	}
	text := "streams: []\n"
	old := `{"layout": 1, "applied": "v1", "versions": [{"id": "v1", "format": "yaml", "sha256": "` + sha(text) + `", "source": "file", "created_at": "2025-03-01T12:00:00Z"}]}`
	if err := os.WriteFile(filepath.Join(dir, "index.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "versions", "v1.yaml"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	v, err := s.Applied()
	if err != nil {
		t.Fatal(err)
	}
	if v.ID != "v1" || v.HubVersion != "" || string(v.Content) != text {
		t.Errorf("Applied = %s hub %q %q, want v1 with no hub version", v.ID, v.HubVersion, v.Content)
	}
}

func TestUnknownIDs(t *testing.T) {
	s := open(t, t.TempDir())
	boot(t, s, fileA)
	appendAPI(t, s, "x: 1\n")
	for _, id := range []string{"", "v", "v0", "v01", "V1", "v1 ", " v1", "v3", "1", "v-1", "v+1", "v1.yaml",
		"../index", "v2/../v1", "v99999999999", "v9223372036854775808", "draft"} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			if _, err := s.Get(id); !errors.Is(err, history.ErrNotFound) {
				t.Errorf("Get: err = %v, want ErrNotFound", err)
			}
			if err := s.MarkApplied(id); !errors.Is(err, history.ErrNotFound) {
				t.Errorf("MarkApplied: err = %v, want ErrNotFound", err)
			}
		})
	}
	if got := appliedID(t, s); got != "v1" {
		t.Errorf("applied = %s after refused MarkApplied, want v1", got)
	}
}

func TestDraft(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if _, ok := s.Draft(); ok {
		t.Fatal("Draft in a new store")
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	d, err := s.SaveDraft([]byte("streams: [  # not valid yet\n"), "yml", at)
	if err != nil {
		t.Fatal(err)
	}
	want := history.Draft{Format: config.YAML, Content: []byte("streams: [  # not valid yet\n"), SHA256: sha("streams: [  # not valid yet\n"), UpdatedAt: at.UTC()}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("SaveDraft (-want +got):\n%s", diff)
	}
	got, ok := open(t, dir).Draft()
	if !ok {
		t.Fatal("draft lost on reopen")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Draft after reopen (-want +got):\n%s", diff)
	}

	want = history.Draft{Format: config.TOML, Content: []byte("streams = []\n"), SHA256: sha("streams = []\n"), UpdatedAt: at.Add(time.Hour).UTC()}
	if _, err := s.SaveDraft(want.Content, config.TOML, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "draft-0123456789abcdef.yaml"), []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	got, ok = s.Draft()
	if !ok {
		t.Fatal("draft lost on reopen")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replaced Draft after reopen (-want +got):\n%s", diff)
	}
	got.Content[0] = 'X'
	if again, _ := s.Draft(); again.Content[0] != 's' {
		t.Error("Draft returned the store's own buffer")
	}
	if texts := glob(t, dir, "draft-*"); len(texts) != 1 || !strings.HasSuffix(texts[0], ".toml") {
		t.Errorf("draft texts on disk = %v, want the one toml text", texts)
	}
}

func TestOpenRefusesDamage(t *testing.T) {
	tests := []struct {
		name     string
		damage   func(dir string) error
		wantFile string
		wantText string
	}{
		{"index not json", write("index.json", "{\"layout\": 1, \"versions\": ["), "index.json", "not valid JSON"},
		{"index empty", write("index.json", ""), "index.json", "not valid JSON"},
		{"index other layout", write("index.json", `{"layout": 2, "versions": []}`), "index.json", "layout 2"},
		{"index ids out of order", editIndex(`"id": "v2"`, `"id": "v5"`), "index.json", `id "v5", want "v2"`},
		{"index applied unknown", editIndex(`"applied": "v2"`, `"applied": "v9"`), "index.json", `applied "v9"`},
		{"index bad format", editIndex(`"format": "json"`, `"format": "xml"`), "index.json", `format "xml"`},
		{"index bad source", editIndex(`"source": "api"`, `"source": "magic"`), "index.json", `source "magic"`},
		{"index hub version on api", editIndex(`"source": "api",`, `"source": "api", "hub_version": "v1",`), "index.json", `hub version "v1" on a api version`},
		{"index hub without hub version", editIndex(`"source": "api",`, `"source": "hub",`), "index.json", `hub version ""`},
		{"index bad sha", editIndex(`"sha256": "`, `"sha256": "X`), "index.json", "sha256"},
		{"index missing", remove("index.json"), "index.json", "is missing but the directory holds"},
		{"version missing", remove("versions/v2.json"), "v2.json", "is missing"},
		{"version tampered", write("versions/v1.yaml", "streams: [] # edited\n"), "v1.yaml", "sha256"},
		{"version huge", write("versions/v1.yaml", strings.Repeat("#", config.MaxSize+1)), "v1.yaml", "larger than"},
		{"draft meta not json", write("draft.json", "nope"), "draft.json", "not valid JSON"},
		{"draft text missing", removeGlob("draft-*.toml"), "draft.json", "missing"},
		{"draft text tampered", writeGlob("draft-*.toml", "x = 1\n"), "draft.json", "sha256"},
		{"draft text huge", writeGlob("draft-*.toml", strings.Repeat("#", config.MaxSize+1)), "draft-", "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir)
			boot(t, s, fileA)
			v, err := s.Append([]byte(`{"streams": []}`), config.JSON, history.SourceAPI, history.Meta{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.MarkApplied(v.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := s.SaveDraft([]byte("streams = []\n"), config.TOML, time.Now()); err != nil {
				t.Fatal(err)
			}
			if _, err := history.Open(dir, time.Now); err != nil {
				t.Fatalf("undamaged store does not open: %v", err)
			}
			if err := tt.damage(dir); err != nil {
				t.Fatal(err)
			}
			_, err = history.Open(dir, time.Now)
			if !errors.Is(err, history.ErrCorrupt) {
				t.Fatalf("Open: err = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tt.wantFile) || !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("Open: err = %q, want it to name %q and say %q", err, tt.wantFile, tt.wantText)
			}
			// Never reset: the index is still there, as it was damaged.
			if _, statErr := os.Stat(filepath.Join(dir, "index.json")); tt.name != "index missing" && statErr != nil {
				t.Errorf("index.json gone after a refused Open: %v", statErr)
			}
		})
	}
}

func TestGetNoticesTampering(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	boot(t, s, fileA)
	if err := os.WriteFile(filepath.Join(dir, "versions", "v1.yaml"), []byte("other"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("v1"); !errors.Is(err, history.ErrCorrupt) {
		t.Errorf("Get of a tampered version: err = %v, want ErrCorrupt", err)
	}
}

func TestNoTemporaryFilesLeft(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	boot(t, s, fileA)
	for i := range 5 {
		v := appendAPI(t, s, fmt.Sprintf("n: %d\n", i))
		if err := s.MarkApplied(v.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SaveDraft([]byte(fmt.Sprintf("d: %d\n", i)), config.YAML, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if left := tempFiles(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if texts := glob(t, dir, "draft-*"); len(texts) != 1 {
		t.Errorf("draft texts on disk = %v, want one", texts)
	}

	// What a crash leaves: temp files, a version text the index never got,
	// a draft text draft.json never pointed to. Open removes them.
	for _, name := range []string{".tmp-index.json-123", "versions/.tmp-v7.yaml-9", "versions/v7.yaml", "versions/v8.toml", "draft-00000000000000ff.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("junk"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s = open(t, dir)
	if left := tempFiles(t, dir); len(left) > 0 {
		t.Errorf("temporary files left after Open: %v", left)
	}
	for _, name := range []string{"versions/v7.yaml", "versions/v8.toml", "draft-00000000000000ff.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: not removed by Open (%v)", name, err)
		}
	}
	v := appendAPI(t, s, "after: crash\n")
	if v.ID != "v7" {
		t.Errorf("next version = %s, want v7", v.ID)
	}
}

func TestFailedWriteChangesNothing(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	boot(t, s, fileA)
	vdir := filepath.Join(dir, "versions")
	// Replace versions/ by a file: creating the temporary file fails.
	if err := os.Rename(vdir, vdir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vdir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append([]byte("x: 1\n"), config.YAML, history.SourceAPI, history.Meta{}); !errors.Is(err, history.ErrStorage) {
		t.Fatalf("Append with versions/ unusable: err = %v, want ErrStorage", err)
	}
	if n := len(s.List()); n != 1 {
		t.Fatalf("failed Append left %d versions", n)
	}
	if err := os.Remove(vdir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(vdir+".away", vdir); err != nil {
		t.Fatal(err)
	}
	if v := appendAPI(t, s, "x: 1\n"); v.ID != "v2" {
		t.Errorf("Append after recovery = %s, want v2", v.ID)
	}
	if n := len(open(t, dir).List()); n != 2 {
		t.Errorf("reopened store has %d versions, want 2", n)
	}
}

func TestConcurrentUse(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	boot(t, s, fileA)
	const workers, each = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				v, err := s.Append([]byte(fmt.Sprintf("w: %d\ni: %d\n", w, i)), config.YAML, history.SourceAPI, history.Meta{Actor: fmt.Sprint(w)})
				if err != nil {
					errs <- err
					return
				}
				if err := s.MarkApplied(v.ID); err != nil {
					errs <- err
				}
				got, err := s.Get(v.ID)
				if err != nil || !bytes.Equal(got.Content, v.Content) {
					errs <- fmt.Errorf("Get(%s) = %q, %v; want %q", v.ID, got.Content, err, v.Content)
				}
				if _, err := s.Applied(); err != nil {
					errs <- err
				}
				if _, err := s.SaveDraft(v.Content, config.YAML, time.Now()); err != nil {
					errs <- err
				}
				s.Draft()
				s.List()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list := s.List()
	if len(list) != 1+workers*each {
		t.Fatalf("%d versions, want %d", len(list), 1+workers*each)
	}
	for i, v := range list {
		if want := fmt.Sprintf("v%d", i+1); v.ID != want {
			t.Fatalf("List()[%d].ID = %s, want %s", i, v.ID, want)
		}
	}
	r := open(t, dir)
	if diff := cmp.Diff(list, r.List()); diff != "" {
		t.Errorf("List after reopen (-before +after):\n%s", diff)
	}
	if a, b := appliedID(t, s), appliedID(t, r); a != b {
		t.Errorf("applied %s, after reopen %s", a, b)
	}
	if left := tempFiles(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestOpenNeedsClock(t *testing.T) {
	if _, err := history.Open(t.TempDir(), nil); !errors.Is(err, history.ErrInvalid) {
		t.Errorf("Open with nil clock: err = %v, want ErrInvalid", err)
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func write(name, text string) func(dir string) error {
	return func(dir string) error { return os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600) }
}

func remove(name string) func(dir string) error {
	return func(dir string) error { return os.Remove(filepath.Join(dir, name)) }
}

func removeGlob(pattern string) func(dir string) error {
	return func(dir string) error {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		if len(m) != 1 {
			return fmt.Errorf("%s matches %v", pattern, m)
		}
		return os.Remove(m[0])
	}
}

func writeGlob(pattern, text string) func(dir string) error {
	return func(dir string) error {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		if len(m) != 1 {
			return fmt.Errorf("%s matches %v", pattern, m)
		}
		return os.WriteFile(m[0], []byte(text), 0o600)
	}
}

func editIndex(old, repl string) func(dir string) error {
	return func(dir string) error {
		p := filepath.Join(dir, "index.json")
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte(old)) {
			return fmt.Errorf("index.json has no %q:\n%s", old, b)
		}
		return os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(repl), 1), 0o600)
	}
}

func glob(t *testing.T, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".tmp-") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
