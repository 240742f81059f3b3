package wire

// AuditRecord is one audit row. It holds scalars only: never a token, a
// configuration body or a job spec. ActorKind is how the actor
// authenticated: token, oidc, node, hub (the Hub acting for the actor, as
// in rollout waves) or anonymous; it is empty on records written before
// kinds were kept. Events, operations, configuration versions and
// rollouts carry actor and actor_kind alike.
type AuditRecord struct {
	ID            int64  `json:"id"`
	OccurredAt    Time   `json:"occurred_at"`
	Actor         string `json:"actor,omitempty"`
	ActorKind     string `json:"actor_kind,omitempty"`
	Action        string `json:"action"`
	ResourceType  string `json:"resource_type,omitempty"`
	ResourceID    string `json:"resource_id,omitempty"`
	NodeID        string `json:"node_id,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	Outcome       string `json:"outcome"`
	FailureCode   string `json:"failure_code,omitempty"`
	Message       string `json:"message,omitempty"`
}
