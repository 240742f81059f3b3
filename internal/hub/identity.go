package hub

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// Problem codes of node identity (docs/node-identity.md).
const (
	// CodeNodeIdentityMismatch answers a registration naming a node id
	// bound to another node credential, or a client certificate that does
	// not name the node id.
	CodeNodeIdentityMismatch = "node_identity_mismatch"
	// CodeClientCertificateRequired answers an agent call without a
	// verified client certificate when SVC_HUB_CLIENT_CA is set.
	CodeClientCertificateRequired = "client_certificate_required"
	// CodeNodeOnline answers a forget of an online node without force.
	CodeNodeOnline = "node_online"
)

// Bounds of a node credential's text (the Agent sends 32 random bytes,
// base64url: 43 characters).
const (
	minCredentialLen = 32
	maxCredentialLen = 512
)

// actionNodeRegister is the audit action of a refused registration.
const actionNodeRegister = "node_register"

// actorHub is the actor id of what the Hub does on its own (node GC,
// configuration re-sent to a restarted node).
const actorHub = "hub"

// credentialDigest is what the Hub keeps of a node credential.
func credentialDigest(cred string) []byte {
	d := sha256.Sum256([]byte(cred))
	return d[:]
}

// sessionBinding is the digest of the registration credentials in force
// for a node bound to credDigest: the shared node token's digest and the
// node credential's. A session whose binding differs (the token rotated,
// the node was forgotten and bound anew) is refused.
func (h *Hub) sessionBinding(credDigest []byte) []byte {
	d := sha256.New()
	d.Write(h.nodeTokenDigest[:])
	d.Write(credDigest)
	return d.Sum(nil)
}

// boundSession reports whether a stored session was made with the
// credentials in force now.
func (h *Hub) boundSession(s store.Session) bool {
	return len(s.Binding) > 0 && subtle.ConstantTimeCompare(s.Binding, h.sessionBinding(s.CredentialDigest)) == 1
}

// clientCAPool reads SVC_HUB_CLIENT_CA.
func clientCAPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvClientCA, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it", EnvClientCA, file)
	}
	return pool, nil
}

// requireClientCertificates makes conf ask for client certificates and
// verify those given against the CA in file. A request without one still
// reaches the operator API (bearer tokens); the agent API refuses it
// (checkClientCert).
func requireClientCertificates(conf *tls.Config, file string) error {
	pool, err := clientCAPool(file)
	if err != nil {
		return err
	}
	conf.ClientCAs, conf.ClientAuth = pool, tls.VerifyClientCertIfGiven
	return nil
}

// NodeCertificateURI is the URI SAN a node's client certificate carries:
// spiffe://<trust domain>/node/<node_id>, any trust domain (the CA is what
// is trusted).
func NodeCertificateURI(trustDomain, nodeID string) string {
	return "spiffe://" + trustDomain + "/node/" + nodeID
}

// certNames reports whether a verified client certificate names nodeID
// in a URI SAN spiffe://<domain>/node/<node_id>.
func certNames(cert *x509.Certificate, nodeID string) bool {
	for _, u := range cert.URIs {
		if u.Scheme == "spiffe" && u.Host != "" && u.User == nil && u.Path == "/node/"+nodeID && u.RawQuery == "" && u.Fragment == "" {
			return true
		}
	}
	return false
}

// errNotNamed: the verified client certificate names another node.
var errNotNamed = errors.New("the client certificate names another node (URI SAN spiffe://<domain>/node/<node_id>)")

// checkClientCert enforces mutual TLS on an agent call of nodeID when
// SVC_HUB_CLIENT_CA is set: a verified client certificate naming nodeID.
// Without one it answers 403 client_certificate_required; one naming
// another node is errNotNamed.
func (h *Hub) checkClientCert(r *http.Request, nodeID string) error {
	if !h.mutualTLS {
		return nil
	}
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
		return httpapi.NewError(http.StatusForbidden, CodeClientCertificateRequired,
			"the agent API requires a client certificate signed by the Hub's client CA (SVC_HUB_CLIENT_CA)")
	}
	if !certNames(r.TLS.PeerCertificates[0], nodeID) {
		return errNotNamed
	}
	return nil
}

func errIdentity(nodeID, why string) error {
	return httpapi.NewError(http.StatusForbidden, CodeNodeIdentityMismatch, fmt.Sprintf(
		"the Hub knows node %q with another credential: %s; if this node lost its state directory, an operator runs `flowplane ctl node forget %s`",
		nodeID, why, nodeID))
}

// identityRefused audits and records a registration refused for its
// identity, and returns the 403 the Agent gets.
func (h *Hub) identityRefused(r *http.Request, nodeID, why string) error {
	ctx := context.WithoutCancel(r.Context())
	now := h.opts.Now()
	corr := httpapi.CorrelationID(ctx)
	by := actorOf(ctx)
	rec := store.AuditRecord{OccurredAt: wire.At(now), Actor: by.id, ActorKind: by.kind, Action: actionNodeRegister, ResourceType: "node",
		ResourceID: nodeID, NodeID: nodeID, CorrelationID: corr, Outcome: store.OutcomeRejected, FailureCode: CodeNodeIdentityMismatch, Message: why}
	if _, err := h.st.AppendAudit(ctx, rec); err != nil {
		h.storeFailed(err)
	}
	ev := wire.Event{Kind: wire.EventNodeIdentityMismatch, OccurredAt: wire.At(now), NodeID: nodeID, ResourceID: nodeID,
		CorrelationID: corr, Outcome: store.OutcomeRejected, Message: why}
	if err := h.st.AppendEvents(ctx, []wire.Event{ev}); err != nil {
		h.storeFailed(err)
	}
	h.log.Warn("hub: registration refused: node identity mismatch", "node_id", nodeID, "reason", why)
	return errIdentity(nodeID, why)
}

// deleteNode forgets a registered node (DELETE /nodes/{node_id}): 409
// node_online while its lease runs unless ?force=true, 404 for a node the
// Hub has not registered. Its session ends at once; its desired state
// stays.
func (h *Hub) deleteNode(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id := r.PathValue("node_id")
	force := false
	switch v := r.URL.Query().Get("force"); v {
	case "", "false":
	case "true":
		force = true
	default:
		return httpapi.BadRequest(httpapi.CodeInvalidQuery, "force must be true or false")
	}
	if n, ok := h.fleet.Node(id); ok && n.Online && !force {
		return httpapi.Conflict(CodeNodeOnline, "the node is online: stop it first, or forget it anyway with ?force=true (its Agent then registers again as a new node)")
	}
	by := actorOf(ctx)
	if err := h.forget(ctx, store.Forget{NodeID: id, Actor: by.id, ActorKind: by.kind, CorrelationID: httpapi.CorrelationID(ctx), Now: h.opts.Now()}); err != nil {
		return h.storeFailedAbout(err, aNode)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// forget removes node f.NodeID from the store and the fleet.
func (h *Hub) forget(ctx context.Context, f store.Forget) error {
	if err := h.st.ForgetNode(ctx, f); err != nil {
		return err
	}
	h.fleet.Forget(f.NodeID)
	h.nodeEvents.forget(f.NodeID)
	h.converge(f.NodeID)
	h.nudge()
	return nil
}
