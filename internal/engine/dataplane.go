package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/dataplane"
)

// DataPlane is a node's data plane: the cross-node transport of the split
// jobs' partitioned edges.
type DataPlane = dataplane.Server

// DataPlaneStatus is the state of a node's data plane: its address, the
// meshes of the split jobs joined and their links.
type DataPlaneStatus = dataplane.Status

// ListenDataPlane starts the node's data plane when health_check.data_port
// is set (nil, nil without it: no data plane, and network_shuffle is never
// advertised). It binds data_host:data_port, the address peers dial. When
// data_host is not an address of this host (EADDRNOTAVAIL: a NAT, load
// balancer or relay address that forwards to it) it binds every interface
// on data_port instead, with a warning: the data plane still refuses any
// connection that does not pass TLS with a pinned certificate and prove
// the job's secret. Its key pair is kept in stateDir
// (dataplane.IdentityFile, created once, 0600): its fingerprint, which
// the Agent advertises, stays the same across restarts. The caller closes
// it, after the engine that uses it stopped.
func ListenDataPlane(hc config.HealthCheck, nodeID, stateDir string, log *slog.Logger, reg prometheus.Registerer) (*DataPlane, error) {
	if hc.DataPort == 0 {
		return nil, nil
	}
	id, err := dataplane.LoadIdentity(stateDir)
	if err != nil {
		return nil, fmt.Errorf("data plane (health_check.data_port): %w", err)
	}
	port := strconv.Itoa(hc.DataPort)
	opts := dataplane.Options{Addr: net.JoinHostPort(hc.DataHost, port), NodeID: nodeID, Logger: log, Registerer: reg, Identity: id}
	dp, err := dataplane.Listen(opts)
	if err != nil && notLocal(hc.DataHost, err) {
		wildcard := net.JoinHostPort("", port)
		log.Warn("health_check.data_host is not an address of this host; the data plane listens on every interface on data_port, and peers still dial data_host",
			"data_host", hc.DataHost, "listen", wildcard)
		opts.Addr = wildcard
		dp, err = dataplane.Listen(opts)
	}
	if err != nil {
		return nil, fmt.Errorf("data plane (health_check.data_port): %w", err)
	}
	log.Info("data plane listening", "address", dp.Addr(), "data_address", net.JoinHostPort(hc.DataHost, port), "data_fingerprint", dp.Fingerprint())
	return dp, nil
}

// notLocal reports whether binding host failed because host is not an
// address of this host: the bind error says so, or a bind of host on an
// ephemeral port fails with EADDRNOTAVAIL.
func notLocal(host string, err error) bool {
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		return true
	}
	l, perr := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if perr == nil {
		l.Close()
		return false
	}
	return errors.Is(perr, syscall.EADDRNOTAVAIL)
}

// DataPlane is the node's data plane (Options.DataPlane): nil without one.
// A node advertises network_shuffle only when it has one.
func (e *Engine) DataPlane() *DataPlane { return e.opts.DataPlane }

// DataPlaneStatus is the state of the node's data plane, with an empty
// (not nil) list of meshes when no split job joined one; nil without a
// data plane.
func (e *Engine) DataPlaneStatus() *DataPlaneStatus {
	dp := e.opts.DataPlane
	if dp == nil {
		return nil
	}
	st := dp.Status()
	if st.Jobs == nil {
		st.Jobs = []dataplane.MeshStatus{}
	}
	return &st
}
