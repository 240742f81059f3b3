package node

import (
	"crypto/sha256"
	"sync"

	"github.com/flowplane/flowplane/internal/config"
)

// maskCacheSize bounds the masked texts kept: the applied version, the
// draft and the versions diffs compare.
const maskCacheSize = 8

// maskCache keeps the masked text of configuration texts by their digest:
// masking parses the document, and the same few texts are served again and
// again.
type maskCache struct {
	mu sync.Mutex // guards m
	m  map[[sha256.Size]byte][]byte
}

// mask returns content with its literal credentials masked
// (config.MaskCredentials).
func (c *maskCache) mask(content []byte, f config.Format) []byte {
	key := sha256.Sum256(append([]byte(string(f)+"\x00"), content...))
	c.mu.Lock()
	out, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return out
	}
	out = config.MaskCredentials(content, f)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maskCacheSize {
		c.m = map[[sha256.Size]byte][]byte{}
	}
	c.m[key] = out
	return out
}
