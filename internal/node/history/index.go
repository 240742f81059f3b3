package history

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/flowplane/flowplane/internal/config"
)

// layoutVersion is the format of index.json and draft.json; a file with
// another value is refused rather than misread.
const layoutVersion = 1

const (
	indexName = "index.json"
	draftName = "draft.json"
	versDir   = "versions"
)

// maxMeta bounds Actor and CorrelationID, so the index stays small.
const maxMeta = 1024

// indexFile is index.json: the versions' metadata, oldest first, and the
// applied pointer. Content lives in versions/<id>.<ext>.
type indexFile struct {
	Layout   int          `json:"layout"`
	Applied  string       `json:"applied"`
	Versions []indexEntry `json:"versions"`
}

type indexEntry struct {
	ID             string    `json:"id"`
	Format         string    `json:"format"`
	SHA256         string    `json:"sha256"`
	Source         string    `json:"source"`
	RolledBackFrom string    `json:"rolled_back_from,omitempty"`
	HubVersion     string    `json:"hub_version,omitempty"` // SourceHub only
	CreatedAt      time.Time `json:"created_at"`
	Actor          string    `json:"actor,omitempty"`
	CorrelationID  string    `json:"correlation_id,omitempty"`
}

// draftFile is draft.json; the text is in draftFileName(format, sha).
type draftFile struct {
	Layout    int       `json:"layout"`
	Format    string    `json:"format"`
	SHA256    string    `json:"sha256"`
	UpdatedAt time.Time `json:"updated_at"`
}

func encodeIndex(vs []Version, applied string) []byte {
	idx := indexFile{Layout: layoutVersion, Applied: applied, Versions: make([]indexEntry, len(vs))}
	for i, v := range vs {
		idx.Versions[i] = indexEntry{
			ID: v.ID, Format: string(v.Format), SHA256: v.SHA256, Source: v.Source,
			RolledBackFrom: v.RolledBackFrom, HubVersion: v.HubVersion, CreatedAt: v.CreatedAt,
			Actor: v.Actor, CorrelationID: v.CorrelationID,
		}
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		panic("history: encode index: " + err.Error()) // only plain strings and times
	}
	return append(b, '\n')
}

// decodeIndex parses and checks index.json; every error describes the
// first problem found, the caller names the file.
func decodeIndex(data []byte) ([]Version, string, error) {
	var idx indexFile
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, "", fmt.Errorf("not valid JSON: %w", err)
	}
	if idx.Layout != layoutVersion {
		return nil, "", fmt.Errorf("layout %d is not the supported layout %d", idx.Layout, layoutVersion)
	}
	vs := make([]Version, len(idx.Versions))
	for i, e := range idx.Versions {
		want := versionID(i + 1)
		if e.ID != want {
			return nil, "", fmt.Errorf("versions[%d]: id %q, want %q (ids are v1, v2, ... in order)", i, e.ID, want)
		}
		f, err := checkFormat(config.Format(e.Format))
		if err != nil || string(f) != e.Format {
			return nil, "", fmt.Errorf("%s: format %q is not yaml, json or toml", e.ID, e.Format)
		}
		if !isSHA256(e.SHA256) {
			return nil, "", fmt.Errorf("%s: sha256 %q is not 64 lower-case hex digits", e.ID, e.SHA256)
		}
		switch e.Source {
		case SourceFile, SourceAPI, SourceHub:
			if e.RolledBackFrom != "" {
				return nil, "", fmt.Errorf("%s: rolled_back_from set on a %s version", e.ID, e.Source)
			}
		case SourceRollback:
			n, ok := parseID(e.RolledBackFrom)
			if !ok || n > i {
				return nil, "", fmt.Errorf("%s: rolled_back_from %q is not an earlier version", e.ID, e.RolledBackFrom)
			}
		default:
			return nil, "", fmt.Errorf("%s: unknown source %q", e.ID, e.Source)
		}
		if err := checkMeta(Meta{Actor: e.Actor, CorrelationID: e.CorrelationID}); err != nil {
			return nil, "", fmt.Errorf("%s: %w", e.ID, err)
		}
		if err := checkHubVersion(e.Source, e.HubVersion); err != nil {
			return nil, "", fmt.Errorf("%s: %w", e.ID, err)
		}
		vs[i] = Version{
			ID: e.ID, Format: f, SHA256: e.SHA256, Source: e.Source, RolledBackFrom: e.RolledBackFrom,
			HubVersion: e.HubVersion, CreatedAt: e.CreatedAt.UTC(), Actor: e.Actor, CorrelationID: e.CorrelationID,
		}
	}
	if idx.Applied != "" {
		if n, ok := parseID(idx.Applied); !ok || n > len(vs) {
			return nil, "", fmt.Errorf("applied %q is not a version in the index", idx.Applied)
		}
	}
	return vs, idx.Applied, nil
}

// versionID is the id of the n-th version (1-based).
func versionID(n int) string { return "v" + strconv.Itoa(n) }

// parseID accepts exactly "v" followed by a positive decimal without
// leading zeros, so every version has one spelling.
func parseID(id string) (int, bool) {
	if len(id) < 2 || len(id) > 11 || id[0] != 'v' || id[1] == '0' {
		return 0, false
	}
	n := 0
	for _, c := range id[1:] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkFormat normalizes a format name ("yml" is YAML) and refuses others.
func checkFormat(f config.Format) (config.Format, error) {
	n, err := config.ParseFormat(string(f))
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return n, nil
}

func checkMeta(m Meta) error {
	for _, f := range []struct{ name, v string }{{"actor", m.Actor}, {"correlation id", m.CorrelationID}} {
		if len(f.v) > maxMeta {
			return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalid, f.name, maxMeta)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, f.name)
		}
	}
	return nil
}

// checkHubVersion requires a Hub version id ("v" and a positive decimal,
// as the Hub numbers them) on a SourceHub version and none on the others.
func checkHubVersion(source, hubVersion string) error {
	if source != SourceHub {
		if hubVersion != "" {
			return fmt.Errorf("%w: hub version %q on a %s version", ErrInvalid, hubVersion, source)
		}
		return nil
	}
	if _, ok := parseID(hubVersion); !ok {
		return fmt.Errorf("%w: hub version %q is not a Hub version id (v1, v2, ...)", ErrInvalid, hubVersion)
	}
	return nil
}

// ext is the file extension of a format.
func ext(f config.Format) string { return "." + string(f) }

// versionFileName is the name of a version's text under versions/.
func versionFileName(id string, f config.Format) string { return id + ext(f) }

// draftFileName names the draft's text by its hash, so a new draft never
// overwrites the file the durable draft.json still points to.
func draftFileName(f config.Format, sha string) string { return "draft-" + sha[:16] + ext(f) }
