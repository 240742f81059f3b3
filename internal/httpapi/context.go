package httpapi

import (
	"context"

	"github.com/google/uuid"

	"github.com/flowplane/flowplane/internal/access"
)

// Header names used by the conventions.
const (
	HeaderCorrelationID     = "X-Correlation-ID"
	HeaderIdempotencyKey    = "Idempotency-Key"
	HeaderIdempotentReplay  = "Idempotent-Replayed"
	maxCorrelationIDLength  = 128
	maxIdempotencyKeyLength = 255
)

type ctxKey int

const (
	correlationKey ctxKey = iota
	principalKey
)

// PrincipalAnonymous is the principal of a request that presented no valid
// credential (every request, when no authentication is configured).
const PrincipalAnonymous = "anonymous"

// CorrelationID returns the request's correlation id, or "" outside a
// Router.
func CorrelationID(ctx context.Context) string {
	id, _ := ctx.Value(correlationKey).(string)
	return id
}

// ContextWithCorrelationID returns ctx carrying id; the Router does this for
// every request, callers need it only for work started outside a request.
func ContextWithCorrelationID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, correlationKey, id)
}

// Principal returns the id of who sent the request, for audit and actor
// fields: the authenticated principal's, or PrincipalAnonymous.
func Principal(ctx context.Context) string {
	if p := Caller(ctx); p.ID != "" {
		return p.ID
	}
	return PrincipalAnonymous
}

// Caller returns who sent the request, with its roles and scopes; the zero
// Principal (no role) outside a Router.
func Caller(ctx context.Context) access.Principal {
	p, _ := ctx.Value(principalKey).(access.Principal)
	return p
}

// ContextWithCaller returns ctx carrying p.
func ContextWithCaller(ctx context.Context, p access.Principal) context.Context {
	return context.WithValue(ctx, principalKey, p)
}

// NewCorrelationID returns a new UUIDv7 string.
func NewCorrelationID() string {
	id, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only when the random source does; v4 fails the same way
		// and panics in Must, which is the right outcome for a broken RNG.
		return uuid.Must(uuid.NewRandom()).String()
	}
	return id.String()
}

// validToken reports whether s is 1..max printable ASCII characters
// (0x20..0x7E), the rule for X-Correlation-ID and Idempotency-Key.
func validToken(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// correlationID returns the id to use for r and whether the client's value
// (if any) was acceptable. A rejected value is replaced by a fresh id so the
// 400 problem still carries one.
func correlationID(vals []string) (id string, ok bool) {
	switch {
	case len(vals) == 0:
		return NewCorrelationID(), true
	case len(vals) == 1 && validToken(vals[0], maxCorrelationIDLength):
		return vals[0], true
	default:
		return NewCorrelationID(), false
	}
}
