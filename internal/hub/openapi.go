package hub

import (
	"net/http"

	"github.com/flowplane/flowplane/internal/openapi"
)

// OpenAPIPath serves the OpenAPI document of the operator and agent APIs
// under the API prefix, behind the operator token like every other
// operator route (routes are not enumerable without it).
const OpenAPIPath = "/openapi.json"

// Tags of the Hub's OpenAPI document.
const (
	tagSystem     = "system"
	tagNodes      = "nodes"
	tagStreams    = "streams"
	tagOperations = "operations"
	tagEvents     = "events"
	tagAudit      = "audit"
	tagComponents = "components"
	tagJobs       = "jobs"
	tagConfig     = "configuration"
	tagRollouts   = "rollouts"
	tagAgent      = "agent"
)

// Security schemes of the Hub's OpenAPI document.
const (
	securityOperator = "operatorToken"
	securityNode     = "nodeToken"
	securitySession  = "sessionToken"
)

// openAPIInfo describes the Hub's operator and agent APIs. The probes,
// the open /metrics and the console live outside the prefix and are not
// part of it (docs/hub-api.md describes them).
func (h *Hub) openAPIInfo() openapi.Info {
	return openapi.Info{
		Title:   "flowplane Hub API",
		Version: "1",
		Description: "The Hub's operator API and, tagged agent, the protocol Agents speak (docs/hub-api.md). " +
			"Errors are the problem envelope of docs/api-conventions.md; every response carries X-Correlation-ID.",
		Prefix: h.prefix,
		Security: map[string]openapi.SecurityScheme{
			securityOperator: {Description: "The operator token (hub --operator-token); without one the Hub serves loopback Host values only."},
			securityNode:     {Description: "The node token Agents register with."},
			securitySession:  {Description: "The session token register answers; 401 session_expired asks the Agent to register again."},
		},
		DefaultSecurity: securityOperator,
		// recovering while the state is restored; storage_unavailable.
		CommonProblems: []int{http.StatusServiceUnavailable},
		Types:          openapi.WireTypes,
	}
}

// OpenAPI returns the Hub's OpenAPI document, the one it serves.
func (h *Hub) OpenAPI() ([]byte, error) { return h.openapi() }
