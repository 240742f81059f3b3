package dataplane

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind is what a frame carries; the payload's encoding belongs to the
// caller.
type Kind uint8

// Frame kinds. Batch, Watermark, Barrier, Idle and End are a job edge's
// elements; Control is the job coordinator's messages.
const (
	KindBatch Kind = iota + 1
	KindWatermark
	KindBarrier
	KindIdle
	KindEnd
	KindControl
)

// Frame is one element of a stream.
type Frame struct {
	Kind    Kind
	Payload []byte // owned by the receiver once Recv returned it
}

// ErrLinkBroken is wrapped by the errors of streams whose link closed or
// broke (peer gone, heartbeat timeout, protocol error).
var ErrLinkBroken = errors.New("dataplane: link broken")

// ErrClosed is returned by a stream or mesh used after Close.
var ErrClosed = errors.New("dataplane: closed")

// Options configure a node's data plane.
type Options struct {
	// Addr is the address to listen on, host:port.
	Addr string
	// NodeID is this node's id, as the Hub knows it.
	NodeID string
	Logger *slog.Logger
	// Registerer receives the svc_dataplane_* collectors (nil: none).
	Registerer prometheus.Registerer
	// Credits is the initial credit of a stream: the frames a receiver
	// buffers for it. Default 16.
	Credits int
	// MaxFrame is the largest payload accepted, in bytes. Default 64 MiB.
	MaxFrame int
	// HeartbeatInterval, default 1 s; HeartbeatTimeout, default 5 s.
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// Identity is the node's data-plane key pair (LoadIdentity); nil
	// makes one for the life of the process.
	Identity *Identity
	// MaxHandshakes bounds the accepted connections in their handshake
	// at once (default 64) and MaxHandshakesPerHost those from one remote
	// IP address (default 8). A connection beyond either is closed at once,
	// as sshd's MaxStartups does, so a flood costs neither memory nor the
	// handshakes of the others for long.
	MaxHandshakes        int
	MaxHandshakesPerHost int

	// plaintext turns TLS off: only the package's tests set it, to show
	// what TLS hides.
	plaintext bool
}

// Server is a node's data plane: the listener and the meshes joined on it.
// Its methods are safe for concurrent use.
type Server struct {
	impl *server
}

// Listen binds opts.Addr and serves links until Close.
func Listen(opts Options) (*Server, error) { return listen(opts) }

// Addr is the address the listener is bound to.
func (s *Server) Addr() string { return s.impl.addr() }

// Close closes the listener and every mesh.
func (s *Server) Close() error { return s.impl.close() }

// Fingerprint is the fingerprint of this node's certificate, which its
// peers pin (the node advertises it with its data address).
func (s *Server) Fingerprint() string { return s.impl.opts.Identity.Fingerprint() }

// Peer is another node of a job as the Hub placed it: the address its
// data plane listens on and its certificate's fingerprint.
type Peer struct {
	Addr        string // host:port
	Fingerprint string // as FingerprintOf writes it
}

// Join makes this node a member of job's mesh: secret authenticates its
// links, peers maps each other node of the job to its address and
// fingerprint (this node's own entry, if any, is ignored). A peer without
// a valid fingerprint is refused: links are never made without TLS.
// Joining a job already joined replaces its mesh: the old one is closed
// first.
func (s *Server) Join(job string, secret []byte, peers map[string]Peer) (*Mesh, error) {
	return s.impl.join(job, secret, peers)
}

// Status is the data plane's state for a node's /status.
func (s *Server) Status() Status { return s.impl.status() }

// Status of a node's data plane.
type Status struct {
	Address string `json:"address"`
	// Fingerprint is the node's data-plane certificate fingerprint.
	Fingerprint string       `json:"fingerprint"`
	Jobs        []MeshStatus `json:"jobs"`
	// Refused counts connections refused since start.
	Refused int64 `json:"connections_refused"`
	// Handshakes is the number of connections in their handshake now.
	Handshakes int `json:"handshakes"`
}

// MeshStatus is one job's links.
type MeshStatus struct {
	Job   string       `json:"job"`
	Links []LinkStatus `json:"links"`
}

// LinkStatus is the link to one peer.
type LinkStatus struct {
	Node    string `json:"node"`
	Address string `json:"address"`
	// State is connecting, up or down.
	State     string    `json:"state"`
	Since     time.Time `json:"since"`
	LastError string    `json:"last_error,omitempty"`
	Streams   int       `json:"streams"`
	// CreditWaits is the number of streams to this peer whose sender waits
	// for credit now.
	CreditWaits int `json:"credit_waits"`
}

// Link states.
const (
	LinkConnecting = "connecting"
	LinkUp         = "up"
	LinkDown       = "down"
)

// Mesh is one job's links on this node.
type Mesh struct {
	impl *mesh
}

// Send opens the stream name to peer. label names the logical channel in
// metrics (for example the edge id): a stream's name may be unique per
// attempt, its label must not be. Send waits for the link to be up, or ctx.
func (m *Mesh) Send(ctx context.Context, peer, name, label string) (*Sender, error) {
	return m.impl.send(ctx, peer, name, label)
}

// Receive claims the stream name from peer. It does not wait: frames are
// delivered by Recv once the sender opened the stream on an up link.
func (m *Mesh) Receive(peer, name, label string) (*Receiver, error) {
	return m.impl.receive(peer, name, label)
}

// Up reports whether the link to peer is up now.
func (m *Mesh) Up(peer string) bool { return m.impl.up(peer) }

// Close closes the mesh's links and streams and leaves the job.
func (m *Mesh) Close() error { return m.impl.close() }

// Sender is the sending end of a stream; one goroutine uses it.
type Sender struct {
	impl *sender
}

// Send sends one frame, waiting for credit or ctx. An error is final:
// ErrLinkBroken, ErrClosed or ctx's.
func (s *Sender) Send(ctx context.Context, f Frame) error { return s.impl.sendFrame(ctx, f) }

// Close tells the receiver the stream ended (after the frames sent) and
// releases it.
func (s *Sender) Close() error { return s.impl.close() }

// Receiver is the receiving end of a stream; one goroutine uses it.
type Receiver struct {
	impl *receiver
}

// Recv returns the next frame, waiting for it or ctx. It returns io.EOF
// after the sender closed the stream and every frame was delivered; an
// error wrapping ErrLinkBroken when the link failed first.
func (r *Receiver) Recv(ctx context.Context) (Frame, error) { return r.impl.recv(ctx) }

// Close releases the stream; frames not received are discarded.
func (r *Receiver) Close() error { return r.impl.close() }
