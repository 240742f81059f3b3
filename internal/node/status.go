package node

import (
	"slices"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/wire"
)

// StreamTotals counts streams by observed state.
type StreamTotals struct {
	Total     int `json:"total"`
	Running   int `json:"running"`
	Failed    int `json:"failed"`
	Stopped   int `json:"stopped"`
	Completed int `json:"completed"`
	Starting  int `json:"starting"`
}

func (n *Node) totals() StreamTotals {
	var t StreamTotals
	for _, s := range n.opts.Engine.Streams() {
		t.Total++
		switch s.State {
		case engine.StreamRunning:
			t.Running++
		case engine.StreamFailed:
			t.Failed++
		case engine.StreamStopped, engine.StreamStopping:
			t.Stopped++
		case engine.StreamCompleted:
			t.Completed++
		case engine.StreamStarting:
			t.Starting++
		}
	}
	return t
}

// JobTotals counts jobs by observed state.
type JobTotals struct {
	Total      int `json:"total"`
	Running    int `json:"running"`
	Failed     int `json:"failed"`
	Stopped    int `json:"stopped"`
	Completed  int `json:"completed"`
	Starting   int `json:"starting"`
	Recovering int `json:"recovering"`
}

func (n *Node) jobTotals() JobTotals {
	var t JobTotals
	for _, j := range n.opts.Engine.Jobs() {
		t.Total++
		switch j.State {
		case engine.JobRunning:
			t.Running++
		case engine.JobFailed:
			t.Failed++
		case engine.JobStopped, engine.JobStopping:
			t.Stopped++
		case engine.JobCompleted:
			t.Completed++
		case engine.JobStarting:
			t.Starting++
		case engine.JobRecovering:
			t.Recovering++
		}
	}
	return t
}

// System is the static descriptor of GET /system.
type System struct {
	NodeID          string    `json:"node_id"`
	BootID          string    `json:"boot_id"`
	Role            string    `json:"role"`
	Version         string    `json:"version"`
	ProtocolVersion int       `json:"protocol_version"`
	StartedAt       wire.Time `json:"started_at"`
	Capabilities    []string  `json:"capabilities"`
	// Agent is the Agent's connection to its Hub; only a node with
	// hub_urls runs an Agent.
	Agent *AgentStatus `json:"agent,omitempty"`
}

// AgentStatus is the Agent's view of its Hub, shown by GET /system on a
// Hub-managed node. LastError never holds a token.
type AgentStatus struct {
	// HubURL is the configured Hub URL in use (userinfo redacted).
	HubURL           string    `json:"hub_url"`
	Connected        bool      `json:"connected"`
	SessionExpiresAt wire.Time `json:"session_expires_at,omitzero"`
	RegisteredAt     wire.Time `json:"registered_at,omitzero"`
	LastError        string    `json:"last_error,omitempty"`
	LastErrorAt      wire.Time `json:"last_error_at,omitzero"`
}

// System describes the node.
func (n *Node) System() System {
	var caps []string
	for _, s := range n.opts.Registry.Specs() {
		caps = append(caps, string(s.Kind)+":"+s.Name)
	}
	return System{
		NodeID: n.opts.NodeID, BootID: n.opts.BootID, Role: "node", Version: n.opts.Version,
		ProtocolVersion: wire.ProtocolVersion, StartedAt: wire.At(n.started), Capabilities: caps,
	}
}

// Status is the runtime status of GET /status.
type Status struct {
	NodeID        string       `json:"node_id"`
	Ready         bool         `json:"ready"`
	Version       string       `json:"version"`
	ConfigVersion string       `json:"config_version"`
	UptimeMs      int64        `json:"uptime_ms"`
	Streams       StreamTotals `json:"streams"`
	Jobs          JobTotals    `json:"jobs"`
	// DataPlane is the state of the engine's data plane: its address, the
	// meshes of the split jobs joined and their links; absent on a node
	// without one (no health_check.data_port).
	DataPlane *engine.DataPlaneStatus `json:"data_plane,omitempty"`
}

// Status reports the node's runtime status.
func (n *Node) Status() Status {
	st := Status{
		NodeID: n.opts.NodeID, Ready: n.opts.Engine.Ready(), Version: n.opts.Version,
		ConfigVersion: n.ConfigVersion(), UptimeMs: n.opts.Now().Sub(n.started).Milliseconds(), Streams: n.totals(),
		Jobs: n.jobTotals(), DataPlane: n.opts.Engine.DataPlaneStatus(),
	}
	return st
}

// View is the node as GET /node and the items of GET /nodes show it.
type View struct {
	NodeID        string       `json:"node_id"`
	Status        string       `json:"status"`
	Mode          string       `json:"mode"`
	BootID        string       `json:"boot_id"`
	Version       string       `json:"version"`
	ConfigVersion string       `json:"config_version"`
	StartedAt     wire.Time    `json:"started_at"`
	Streams       StreamTotals `json:"streams"`
}

// View returns the node view. A standalone node is always online and active.
func (n *Node) View() View {
	return View{
		NodeID: n.opts.NodeID, Status: "online", Mode: "active", BootID: n.opts.BootID, Version: n.opts.Version,
		ConfigVersion: n.ConfigVersion(), StartedAt: wire.At(n.started), Streams: n.totals(),
	}
}

// Probe is the JSON body of the probe endpoints.
type Probe struct {
	Status   string   `json:"status"`
	UptimeMs int64    `json:"uptime_ms"`
	NotReady []string `json:"not_ready,omitempty"`
	Failed   []string `json:"failed,omitempty"`
}

// Liveness is true while the process runs.
func (n *Node) Liveness() Probe {
	return Probe{Status: "live", UptimeMs: n.opts.Now().Sub(n.started).Milliseconds()}
}

// Readiness is ready once the engine finished starting what it is meant to
// run (engine.NotReady): a stream stopped on purpose, or completed, keeps
// the node ready; one that should run and does not is named in not_ready.
func (n *Node) Readiness() (Probe, bool) {
	p := Probe{Status: "ready", UptimeMs: n.opts.Now().Sub(n.started).Milliseconds()}
	p.NotReady = n.opts.Engine.NotReady()
	if len(p.NotReady) > 0 {
		p.Status = "not_ready"
		return p, false
	}
	return p, true
}

// Health is healthy when ready and no stream or job failed.
func (n *Node) Health() (Probe, bool) {
	p, ready := n.Readiness()
	p.Failed = n.opts.Engine.Failed()
	for _, s := range n.opts.Engine.Streams() {
		if s.State == engine.StreamFailed && !slices.Contains(p.Failed, s.ID) {
			p.Failed = append(p.Failed, s.ID)
		}
	}
	switch {
	case len(p.Failed) > 0:
		p.Status = "unhealthy"
		return p, false
	case !ready:
		p.Status = "starting"
		return p, false
	}
	p.Status = "healthy"
	return p, true
}

// ComponentInfo is an item of GET /components.
type ComponentInfo = component.Info

// ComponentDetail is GET /components/{kind}/{name}.
type ComponentDetail = component.Detail

// Components lists the registered components.
func (n *Node) Components() []ComponentInfo { return n.opts.Registry.Catalog() }

// Component returns one component's schema and example.
func (n *Node) Component(kind, name string) (ComponentDetail, bool) {
	return n.opts.Registry.Describe(kind, name)
}
