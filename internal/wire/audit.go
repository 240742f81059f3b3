package wire

// AuditRecord is one audit row. It holds scalars only: never a token, a
// configuration body or a job spec.
type AuditRecord struct {
	ID            int64  `json:"id"`
	OccurredAt    Time   `json:"occurred_at"`
	Actor         string `json:"actor,omitempty"`
	Action        string `json:"action"`
	ResourceType  string `json:"resource_type,omitempty"`
	ResourceID    string `json:"resource_id,omitempty"`
	NodeID        string `json:"node_id,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	Outcome       string `json:"outcome"`
	FailureCode   string `json:"failure_code,omitempty"`
	Message       string `json:"message,omitempty"`
}
