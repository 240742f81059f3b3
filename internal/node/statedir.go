package node

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/flowplane/flowplane/internal/lockfile"
)

// StateDirLock is the lock file a node holds in its state directory while
// it runs.
const StateDirLock = "flowplane.lock"

// LegacyStateDir is the state directory beside the configuration file that
// earlier releases used by default.
const LegacyStateDir = ".flowplane"

// StateDirLegacy is the Source of a .flowplane/ beside the configuration
// file that holds a node's state from an earlier release.
const StateDirLegacy = "legacy"

// StateDir is where a node keeps its durable state, and why there.
type StateDir struct {
	Path string
	// Source is "flag", "SVC_STATE_ROOT", "XDG_STATE_HOME", "HOME" or
	// StateDirLegacy.
	Source string
}

// ResolveStateDir picks a node's state directory: flag (--state-dir), else
// SVC_STATE_ROOT, else a directory of its own per configuration file under
// the user's state directory, $XDG_STATE_HOME/flowplane/<name> (default
// $HOME/.local/state/flowplane/<name>), where <name> is the file's base
// name and a hash of its absolute path (see StateName). A .flowplane/
// beside the file that already holds a node's state (from releases that
// kept it there) wins over the per-user default, so that an upgrade keeps
// its node id and its unacknowledged WAL entries. getenv reads the
// environment.
func ResolveStateDir(flag, configPath string, getenv func(string) string) (StateDir, error) {
	if flag != "" {
		return StateDir{Path: flag, Source: "flag"}, nil
	}
	if v := getenv("SVC_STATE_ROOT"); v != "" {
		return StateDir{Path: v, Source: "SVC_STATE_ROOT"}, nil
	}
	legacy := filepath.Join(filepath.Dir(configPath), LegacyStateDir)
	for _, f := range []string{"node_id", "config", "wal"} {
		if _, err := os.Stat(filepath.Join(legacy, f)); err == nil {
			return StateDir{Path: legacy, Source: StateDirLegacy}, nil
		}
	}
	name, err := StateName(configPath)
	if err != nil {
		return StateDir{}, err
	}
	// The XDG Base Directory spec ignores a relative XDG_STATE_HOME.
	if v := getenv("XDG_STATE_HOME"); filepath.IsAbs(v) {
		return StateDir{Path: filepath.Join(v, "flowplane", name), Source: "XDG_STATE_HOME"}, nil
	}
	if home := getenv("HOME"); filepath.IsAbs(home) {
		return StateDir{Path: filepath.Join(home, ".local", "state", "flowplane", name), Source: "HOME"}, nil
	}
	return StateDir{}, errors.New("no state directory: neither XDG_STATE_HOME nor HOME is set to an absolute path; pass --state-dir or set SVC_STATE_ROOT")
}

// StateName is the name of a configuration file's default state directory:
// its base name without the extension, then the first 8 hex digits of the
// SHA-256 of its absolute path with symbolic links resolved, e.g.
// "quickstart-1a2b3c4d". The same file always gets the same directory (so
// its node keeps its id), two files never share one.
func StateName(configPath string) (string, error) {
	abs, err := filepath.Abs(configPath)
	if err != nil {
		return "", fmt.Errorf("state directory for %s: %w", configPath, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	base := strings.TrimSuffix(filepath.Base(abs), filepath.Ext(abs))
	clean := []rune{}
	for _, r := range base {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			clean = append(clean, r)
		default:
			clean = append(clean, '_')
		}
		if len(clean) == 64 {
			break
		}
	}
	sum := sha256.Sum256([]byte(abs))
	return strings.TrimLeft(string(clean), ".") + "-" + hex.EncodeToString(sum[:4]), nil
}

// StateDirInUseError reports a state directory another process holds.
type StateDirInUseError struct {
	Dir  string
	Held *lockfile.HeldError
}

func (e *StateDirInUseError) Error() string {
	who := "another process"
	if e.Held.PID != 0 {
		who = fmt.Sprintf("process %d", e.Held.PID)
	}
	return fmt.Sprintf("state directory %s is in use by %s (lock file %s): stop that node, or give this one its own --state-dir", e.Dir, who, e.Held.Path)
}

func (e *StateDirInUseError) Unwrap() error { return e.Held }

// LockStateDir creates dir (0700) when missing and takes its lock for the
// life of the process, or until Release. A directory another node holds
// returns a *StateDirInUseError naming it and the holder's pid.
func LockStateDir(dir string) (*lockfile.Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	l, err := lockfile.Acquire(filepath.Join(dir, StateDirLock))
	var he *lockfile.HeldError
	if errors.As(err, &he) {
		return nil, &StateDirInUseError{Dir: dir, Held: he}
	}
	if err != nil {
		return nil, fmt.Errorf("lock state directory %s: %w", dir, err)
	}
	return l, nil
}
