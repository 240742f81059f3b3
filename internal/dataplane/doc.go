// Package dataplane is the cross-node transport of split jobs: one TCP
// listener per node (health_check.data_port), authenticated links between
// the nodes of a job, and logical streams over them with credit-based flow
// control, as Flink's network stack does.
//
// # Links
//
// A Mesh is one job's membership on a node: its secret and the data
// addresses of its peers. For every pair of nodes of a mesh there is one
// link: the node whose id sorts first dials the other, and redials with
// capped backoff while the mesh lives; the other accepts. A link is one TLS
// 1.3 connection, mutually authenticated without a CA: each node has an
// Identity (a key and self-signed certificate, LoadIdentity), the Hub
// hands every node of a job its peers' certificate fingerprints (Peer), the
// dialer pins the server's certificate and the listener accepts only
// client certificates pinned by a joined job. Inside TLS both ends prove
// they hold the job's secret (challenge and response with HMAC-SHA256 over
// random nonces, the job id and both node ids; the secret itself never
// crosses the wire), and the acceptor requires the client certificate to
// be the one pinned for the node the dialer claims to be. Every refusal
// looks the same on the wire; it is logged sampled, without the secret,
// and counted (svc_dataplane_connections_refused_total{reason}).
//
// Before authentication a connection is cheap and short: at most
// MaxHandshakes accepted connections are in their handshake at once, and
// MaxHandshakesPerHost per remote address (beyond, closed at accept, as
// sshd's MaxStartups); the handshake has a deadline; it is read through a
// small buffer, the link's large one comes after authentication.
//
// Both ends send a heartbeat every HeartbeatInterval when they have sent
// nothing else; an end that hears nothing for HeartbeatTimeout closes the
// link. A closed or broken link fails every stream on it: their Send and
// Recv return an error wrapping ErrLinkBroken. Streams are not resumed on a
// new link: the job fails its tasks and recovers from a checkpoint.
//
// # Streams and credits
//
// A stream is one direction of one logical channel, named by its sender
// (for example an edge's upstream and downstream subtask, and the attempt).
// The sender opens it with Mesh.Send; the receiver claims the same name with
// Mesh.Receive, before or after the sender opened it. Frames travel in order.
// A receiver grants Credits frames when it claims the stream, and one more
// each time Recv hands a frame over; a sender spends one credit per frame and
// blocks while it has none. So a slow receiver slows only the senders of its
// own streams, a receiver holds at most Credits frames per stream, and
// nothing is dropped. A frame over MaxFrame bytes, a frame without credit,
// or any malformed input closes the link (a protocol error).
package dataplane
