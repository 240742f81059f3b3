package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/flowplane/flowplane/internal/wire"
)

// LoadNodeID returns the configured node id, or the one generated and
// persisted in stateDir/node_id on the node's first start, so that it is
// stable across restarts.
func LoadNodeID(configured, stateDir string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	path := filepath.Join(stateDir, "node_id")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if !wire.ValidID(id) {
			return "", fmt.Errorf("node id file %s holds no valid id", path)
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read node id: %w", err)
	}
	id := uuid.Must(uuid.NewV7()).String()
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", fmt.Errorf("create state directory: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write node id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write node id: %w", err)
	}
	return id, nil
}
