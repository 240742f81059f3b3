package hub

import (
	"sync"
	"sync/atomic"
)

// convergeWork is the convergence worker's state (convergeLoop): what to
// look at next, and what it last saw of each resource. Anyone may add work
// (Hub.converge, Hub.convergeWritten); only the worker and the restore take
// it and remember what they saw.
type convergeWork struct {
	wake chan struct{} // wakes the worker

	mu    sync.Mutex             // guards nodes and res
	nodes map[string]bool        // nodes whose convergence must be recomputed ("" = all)
	res   map[[2]string]*written // single streams (node, id) to recompute: nil reads the store, else the state a write carried

	seenMu sync.Mutex          // guards seen
	seen   map[string]convSeen // last convergence seen by node\x00kind\x00resource
	// primed: seen holds the baseline of the restore; before it, a first
	// look at a resource is no change.
	primed atomic.Bool
	// lastFull is when every node was last looked at, in Unix milliseconds.
	lastFull atomic.Int64
}

func newConvergeWork() *convergeWork {
	return &convergeWork{wake: make(chan struct{}, 1), nodes: map[string]bool{}, res: map[[2]string]*written{}, seen: map[string]convSeen{}}
}

// add asks for a look at a node's resources ("" = every node), or only at
// the named streams and jobs of the node, as the store has them.
func (c *convergeWork) add(nodeID string, ids ...string) {
	c.mu.Lock()
	if len(ids) == 0 {
		c.nodes[nodeID] = true
	}
	for _, id := range ids {
		c.res[[2]string{nodeID, id}] = nil
	}
	c.mu.Unlock()
	wake(c.wake)
}

// addWritten asks for a look at a stream with the state a write carried.
// A pending request to read the stream back wins: it sees this write and
// whatever followed.
func (c *convergeWork) addWritten(w *written) {
	k := [2]string{w.rs.NodeID, w.rs.ResourceID}
	c.mu.Lock()
	if prev, ok := c.res[k]; !ok || (prev != nil && prev.asOf < w.asOf) {
		c.res[k] = w
	}
	c.mu.Unlock()
	wake(c.wake)
}

// take returns the work asked for so far and starts a new list.
func (c *convergeWork) take() (map[string]bool, map[[2]string]*written) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nodes, res := c.nodes, c.res
	c.nodes, c.res = map[string]bool{}, map[[2]string]*written{}
	return nodes, res
}

// retry puts work that failed back, to be read from the store at the next
// wake.
func (c *convergeWork) retry(nodes map[string]bool, res map[[2]string]*written) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range nodes {
		c.nodes[id] = true
	}
	for k := range res {
		c.res[k] = nil
	}
}

// look records cur as what the worker saw of key, unless it saw a newer
// state already (stale), and returns what it saw before.
func (c *convergeWork) look(key string, cur convSeen) (prev convSeen, known, stale bool) {
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	prev, known = c.seen[key]
	stale = known && cur.asOf < prev.asOf
	if !stale {
		c.seen[key] = cur
	}
	return prev, known, stale
}

// baseline records what the restore saw of key.
func (c *convergeWork) baseline(key string, s convSeen) {
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	c.seen[key] = s
}
