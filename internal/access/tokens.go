package access

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// TokenBytes is how many random bytes NewToken draws.
const TokenBytes = 32

// NamedToken is one line of the tokens file: a principal and the SHA-256 of
// its bearer token (the token itself is never stored).
type NamedToken struct {
	Name    string
	Role    Role
	Scopes  []Scope
	SHA256  [sha256.Size]byte
	Expires time.Time // zero: never
}

// Principal is the principal the token authenticates as.
func (t NamedToken) Principal() Principal {
	return Principal{ID: t.Name, Kind: KindToken, Roles: []Role{t.Role}, Scopes: t.Scopes, Expires: t.Expires}
}

// Line is t as a line of the tokens file.
func (t NamedToken) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "name=%s role=%s", t.Name, t.Role)
	if len(t.Scopes) > 0 {
		ss := make([]string, len(t.Scopes))
		for i, s := range t.Scopes {
			ss[i] = s.String()
		}
		b.WriteString(" scopes=" + strings.Join(ss, ","))
	}
	b.WriteString(" sha256=" + hex.EncodeToString(t.SHA256[:]))
	if !t.Expires.IsZero() {
		b.WriteString(" expires=" + t.Expires.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// NewToken returns a fresh bearer token of TokenBytes random bytes, hex
// encoded, and its SHA-256.
func NewToken() (string, [sha256.Size]byte, error) {
	raw := make([]byte, TokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", [sha256.Size]byte{}, err
	}
	tok := hex.EncodeToString(raw)
	return tok, sha256.Sum256([]byte(tok)), nil
}

// ParseTokens reads a tokens file: one token a line as space-separated
// key=value fields, `name=ci role=operator scopes=job:etl-*,node:edge-1
// sha256=<64 hex> expires=2027-01-01T00:00:00Z` (scopes and expires
// optional); blank lines and lines starting with # are skipped. Names are
// unique, and neither "operator" (the bootstrap principal) nor "hub".
// Errors name the line, never a digest.
func ParseTokens(data []byte) ([]NamedToken, error) {
	var (
		out   []NamedToken
		errs  []error
		names = map[string]bool{}
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		t, err := parseTokenLine(line)
		if err == nil && names[t.Name] {
			err = fmt.Errorf("name %q is used twice", t.Name)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			continue
		}
		names[t.Name] = true
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

func parseTokenLine(line string) (NamedToken, error) {
	var (
		t    NamedToken
		seen = map[string]bool{}
	)
	for f := range strings.FieldsSeq(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			return t, fmt.Errorf("field %s is not key=value", shown(k))
		}
		if seen[k] {
			return t, fmt.Errorf("field %s is given twice", shown(k))
		}
		seen[k] = true
		var err error
		switch k {
		case "name":
			t.Name = v
			if !validName(v) {
				err = fmt.Errorf("name %s: 1 to 64 letters, digits, '.', '_', '-' or '@'", shown(v))
			} else if v == "operator" || v == "hub" || v == string(KindAnonymous) {
				err = fmt.Errorf("name %q is reserved", v)
			}
		case "role":
			t.Role, err = ParseRole(v)
		case "scopes":
			t.Scopes, err = ParseScopes(strings.Split(v, ","))
		case "sha256":
			var b []byte
			b, err = hex.DecodeString(v)
			if err != nil || len(b) != sha256.Size {
				err = errors.New("sha256 must be 64 hex digits")
			} else {
				copy(t.SHA256[:], b)
			}
		case "expires":
			t.Expires, err = time.Parse(time.RFC3339, v)
			if err != nil {
				err = fmt.Errorf("expires %s is not RFC 3339", shown(v))
			}
		default:
			err = fmt.Errorf("unknown field %s", shown(k))
		}
		if err != nil {
			return t, err
		}
	}
	for _, k := range []string{"name", "role", "sha256"} {
		if !seen[k] {
			return t, fmt.Errorf("%s is missing", k)
		}
	}
	return t, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	return !strings.ContainsFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-@", c))
	})
}

// Lookup returns the principal of the token whose digest is sum. Every
// entry is compared, in constant time, so neither which entry matched nor
// whether one did shows in the time taken.
func Lookup(tokens []NamedToken, sum [sha256.Size]byte) (Principal, bool) {
	var (
		found Principal
		hit   int
	)
	for i := range tokens {
		if subtle.ConstantTimeCompare(tokens[i].SHA256[:], sum[:]) == 1 {
			found, hit = tokens[i].Principal(), 1
		}
	}
	return found, hit == 1
}

// TokenFile is the tokens file (SVC_HUB_TOKENS_FILE), reloaded when its
// modification time or size changes. A file that no longer parses keeps
// the last good tokens in force and is logged.
type TokenFile struct {
	path string
	log  *slog.Logger

	mu     sync.RWMutex // guards tokens and stamp
	tokens []NamedToken
	stamp  fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// LoadTokenFile reads path; an unreadable or invalid file is an error (the
// Hub refuses to start).
func LoadTokenFile(path string, log *slog.Logger) (*TokenFile, error) {
	f := &TokenFile{path: path, log: log}
	if err := f.reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Tokens returns the tokens in force.
func (f *TokenFile) Tokens() []NamedToken {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.tokens
}

// Poll checks the file every interval until ctx ends and reloads it when
// it changed.
func (f *TokenFile) Poll(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := f.reload(); err != nil {
				f.log.Error("tokens file: keeping the last good tokens", "err", err)
			}
		}
	}
}

// reload reads the file when its stamp changed since the last good read.
func (f *TokenFile) reload() error {
	st, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("tokens file %s: %w", f.path, errors.Unwrap(err))
	}
	stamp := fileStamp{mod: st.ModTime(), size: st.Size()}
	f.mu.RLock()
	same := f.stamp == stamp && f.tokens != nil
	f.mu.RUnlock()
	if same {
		return nil
	}
	if st.Mode().Perm()&0o077 != 0 {
		f.log.Warn("tokens file is readable by group or others", "path", f.path, "mode", fs.FileMode(st.Mode().Perm()).String())
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("tokens file %s: %w", f.path, errors.Unwrap(err))
	}
	tokens, err := ParseTokens(data)
	if err != nil {
		return fmt.Errorf("tokens file %s: %w", f.path, err)
	}
	if tokens == nil {
		tokens = []NamedToken{}
	}
	f.mu.Lock()
	f.tokens, f.stamp = tokens, stamp
	f.mu.Unlock()
	f.log.Info("tokens file loaded", "path", f.path, "tokens", len(tokens))
	return nil
}
