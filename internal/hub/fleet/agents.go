package fleet

import (
	"crypto/sha256"
	"slices"
	"time"

	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// Session is a cached Agent session: whose it is and until when.
type Session struct {
	NodeID    string
	ExpiresAt time.Time
}

// sessionKey is the cache key of a session token: the fleet keeps no
// token itself.
func sessionKey(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// Session returns the cached session of token, if any. An expired one is
// returned all the same: the caller drops it (DropSession).
func (f *Fleet) Session(token string) (Session, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[sessionKey(token)]
	return s, ok
}

// CacheSession remembers a session the store knows as its node's current
// one, unless the node was forgotten since the store was read.
func (f *Fleet) CacheSession(token string, s Session) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.nodes[s.NodeID]; n != nil && n.forgotten {
		return
	}
	f.cacheSessionLocked(sessionKey(token), s)
}

func (f *Fleet) cacheSessionLocked(key [sha256.Size]byte, s Session) {
	f.sessions[key] = s
	f.sessionOf[s.NodeID] = key
}

// DropSession forgets the cached session of token.
func (f *Fleet) DropSession(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sessions, sessionKey(token))
}

// ExpireSessions forgets the cached sessions expired at now.
func (f *Fleet) ExpireSessions(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, s := range f.sessions {
		if !now.Before(s.ExpiresAt) {
			delete(f.sessions, k)
		}
	}
}

// Register records a registration the store accepted: the node's new
// session replaces its old one at once and its lease runs from reg.Now for
// reg.LeaseTTL. It reports whether the node came online, and whether a new
// process took the node's place (rebooted): what the old one reported is
// stale until the new one reports.
func (f *Fleet) Register(reg store.Registration) (came, rebooted bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodeLocked(reg.NodeID)
	n.forgotten = false
	n.changes++
	if old, ok := f.sessionOf[reg.NodeID]; ok {
		delete(f.sessions, old)
	}
	f.cacheSessionLocked(sessionKey(reg.SessionToken), Session{NodeID: reg.NodeID, ExpiresAt: reg.SessionExpiresAt})
	n.node.NodeID, n.node.BootID, n.node.Version, n.node.ProtocolVersion = reg.NodeID, reg.BootID, reg.Version, reg.ProtocolVersion
	n.node.Capabilities, n.node.DataAddress, n.node.RegisteredAt, n.node.SessionExpiresAt = reg.Capabilities, reg.DataAddress, reg.Now, reg.SessionExpiresAt
	n.node.DataFingerprint = reg.DataFingerprint
	n.leaseTTL = reg.LeaseTTL
	came = n.renewLocked(reg.Now)
	rebooted = n.fresh && n.reportBoot != reg.BootID
	if rebooted {
		n.fresh = false
	}
	return came, rebooted
}

// Admitted reports whether node id is registered (and not forgotten since),
// and how many nodes are: the Hub's admission counts these against
// SVC_HUB_MAX_NODES. Nodes the Hub only keeps desired state for do not
// count.
func (f *Fleet) Admitted(id string) (known bool, registered int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for nid, n := range f.nodes {
		if n.node.RegisteredAt.IsZero() {
			continue
		}
		registered++
		if nid == id {
			known = true
		}
	}
	return known, registered
}

// Forget drops node id's registration, as the store's ForgetNode did: its
// session stops working at once, its long-polls are answered with no
// command, it is unavailable and what it reported is gone. Its queued
// commands stay, undelivered until the node registers again.
func (f *Fleet) Forget(id string) {
	f.mu.Lock()
	n := f.nodeLocked(id)
	if key, ok := f.sessionOf[id]; ok {
		delete(f.sessions, key)
		delete(f.sessionOf, id)
	}
	mode := wire.NodeModeActive
	n.node = store.Node{NodeID: id, Mode: mode}
	n.changes++
	n.forgotten, n.online, n.fresh = true, false, false
	n.reportBoot, n.reportSeq, n.reportedAt, n.cfgVersion = "", 0, time.Time{}, ""
	n.observed, n.counters, n.cfg, n.metrics = nil, nil, nil, nil
	parked := n.parked
	n.parked = nil
	for _, p := range parked {
		p.timer.Stop()
	}
	if n.wake != nil {
		close(n.wake)
		n.wake = nil
	}
	f.mu.Unlock()
	for _, p := range parked {
		p.answer(nil)
	}
}

// renewLocked extends n's lease from now and reports whether the node just
// came online. Fleet.mu is held.
func (n *node) renewLocked(now time.Time) bool {
	n.leaseUntil = now.Add(n.leaseTTL)
	if n.online {
		return false
	}
	n.online = true
	return true
}

// Heartbeat renews node id's lease from now. It returns the lease's end,
// whether the node came online, and whether caps (sorted), addr or fp (its
// data-plane fingerprint) differ from what the node advertised: then the
// caller writes them and calls Advertise.
func (f *Fleet) Heartbeat(id string, caps []string, addr, fp string, now time.Time) (until time.Time, came, changed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodeLocked(id)
	changed = !slices.Equal(caps, n.node.Capabilities) || addr != n.node.DataAddress || fp != n.node.DataFingerprint
	came = n.renewLocked(now)
	return n.leaseUntil, came, changed
}

// Advertise records what node id advertises, as the store holds it now.
func (f *Fleet) Advertise(id string, caps []string, addr, fp string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodeLocked(id)
	n.node.Capabilities, n.node.DataAddress, n.node.DataFingerprint = caps, addr, fp
	n.changes++
}

// ExpireLeases marks the nodes whose lease lapsed at now unavailable (what
// they reported is stale until they report again) and returns them, by id.
func (f *Fleet) ExpireLeases(now time.Time) []string {
	var gone []string
	f.mu.Lock()
	for id, n := range f.nodes {
		if n.online && !now.Before(n.leaseUntil) {
			n.online, n.fresh = false, false
			gone = append(gone, id)
		}
	}
	f.mu.Unlock()
	slices.Sort(gone)
	return gone
}

// Report is one report of a node, as the Hub read it.
type Report struct {
	NodeID  string
	BootID  string
	Seq     int64
	Streams []store.ObservedStream // by stream id; the fleet keeps the slice
	// Counters are the streams' counters, by stream (never written to disk).
	Counters      map[string]wire.StreamCounters
	ConfigVersion string
	Configuration *wire.ReportConfiguration
	Metrics       map[string]float64 // the fleet keeps the map
	Now           time.Time
}

// Received is what a report is, against what the node reported before.
type Received struct {
	// Stale: an older report of the same boot, or the same one again.
	Stale bool
	// Same: it says nothing new (nothing to write); the fleet took its
	// order and metrics, and the observation is current.
	Same bool
	// Refreshed: Same, and the node's observation was not current before.
	Refreshed bool
	// SameConfig: it carries no configuration or the one reported before.
	SameConfig bool
	// Prev, PrevConfigVersion and WasFresh are the accepted observation
	// before the report (Prev is shared: read it, never modify it).
	Prev              []store.ObservedStream
	PrevConfigVersion string
	WasFresh          bool
}

// Receive compares a report with what its node reported before. A report
// that is not stale updates the node's counters; one that says nothing new
// is taken whole (Received.Same). Any other is written to the store and
// then given to Accept.
func (f *Fleet) Receive(r Report) Received {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodeLocked(r.NodeID)
	var out Received
	out.Stale = n.reportBoot == r.BootID && r.Seq <= n.reportSeq
	if !out.Stale {
		n.counters = r.Counters
	}
	out.SameConfig = r.Configuration == nil || (n.cfg != nil && *n.cfg == *r.Configuration)
	out.Same = !out.Stale && n.reportBoot == r.BootID && n.cfgVersion == r.ConfigVersion && out.SameConfig && SameObservation(n.observed, r.Streams)
	out.Refreshed = out.Same && !n.fresh
	if out.Same {
		n.reportSeq, n.metrics, n.reportedAt, n.fresh = r.Seq, r.Metrics, r.Now, true
	}
	out.Prev, out.PrevConfigVersion, out.WasFresh = n.observed, n.cfgVersion, n.fresh
	return out
}

// Accept takes a report the store accepted (not stale there) as the
// node's observation; newBoot: the store counted a restart of the node.
func (f *Fleet) Accept(r Report, newBoot bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodeLocked(r.NodeID)
	n.reportBoot, n.reportSeq, n.observed, n.cfgVersion, n.metrics, n.reportedAt = r.BootID, r.Seq, r.Streams, r.ConfigVersion, r.Metrics, r.Now
	n.node.ReportBootID, n.node.ReportSeq, n.node.ReportedAt = r.BootID, r.Seq, r.Now
	n.fresh = true
	if r.Configuration != nil {
		c := *r.Configuration
		n.cfg = &c
	}
	if newBoot {
		n.node.Restarts++
	}
}

// SameObservation reports whether two observations (by stream id) say the
// same of every stream.
func SameObservation(a, b []store.ObservedStream) bool {
	return slices.EqualFunc(a, b, func(x, y store.ObservedStream) bool {
		return x.StreamID == y.StreamID && x.State == y.State && x.Generation == y.Generation &&
			x.ConfigVersion == y.ConfigVersion && x.ActionID == y.ActionID && x.LastError == y.LastError &&
			x.LastErrorAt.Equal(y.LastErrorAt)
	})
}
