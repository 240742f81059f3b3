package httpapi

import (
	"fmt"
	"net/http"
	"strings"
)

// Codes produced by this package or shared by every surface (API.md). Surface
// specific codes (stream_not_found, job_must_be_stopped, ...) are defined by
// the surfaces.
const (
	CodeInvalidJSON          = "invalid_json"
	CodeInvalidQuery         = "invalid_query"
	CodeInvalidHeader        = "invalid_header"
	CodeUnauthorized         = "unauthorized"
	CodeForbidden            = "forbidden"
	CodeNotFound             = "not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeConflict             = "conflict"
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	CodeIdempotencyKeyInUse  = "idempotency_key_in_use"
	CodeGenerationConflict   = "generation_conflict"
	CodeBodyTooLarge         = "body_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeValidationFailed     = "validation_failed"
	CodeUnavailable          = "unavailable"
	CodeInternal             = "internal"
)

// Error is an error a handler wants the client to see. Status, Code,
// Message and Details go into the problem envelope; Cause is only logged
// (for 5xx) and never sent, so Message must not be built from it. Header
// holds extra response headers (Allow, WWW-Authenticate, Retry-After).
type Error struct {
	Status  int
	Code    string
	Message string
	Details map[string]any
	Header  http.Header
	Cause   error
}

// Error describes e for logs; it includes the cause.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s: %s", e.Status, e.Code, e.Message)
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// WithCause sets the logged cause and returns e.
func (e *Error) WithCause(err error) *Error {
	e.Cause = err
	return e
}

// NewError returns an Error with the given status, code and client message.
func NewError(status int, code, msg string) *Error {
	return &Error{Status: status, Code: code, Message: msg}
}

// BadRequest is a 400 (code invalid_json, invalid_query or invalid_header).
func BadRequest(code, msg string) *Error { return NewError(http.StatusBadRequest, code, msg) }

// Unauthorized is a 401; the response carries WWW-Authenticate: Bearer.
func Unauthorized(code, msg string) *Error {
	e := NewError(http.StatusUnauthorized, code, msg)
	e.Header = http.Header{"Www-Authenticate": {"Bearer"}}
	return e
}

// Forbidden is a 403 forbidden.
func Forbidden(msg string) *Error { return NewError(http.StatusForbidden, CodeForbidden, msg) }

// NotFound is a 404 with a resource-specific code (not_found for routes).
func NotFound(code, msg string) *Error { return NewError(http.StatusNotFound, code, msg) }

// MethodNotAllowed is a 405 method_not_allowed with an Allow header.
func MethodNotAllowed(allow []string) *Error {
	e := NewError(http.StatusMethodNotAllowed, CodeMethodNotAllowed,
		"method not allowed; allowed: "+strings.Join(allow, ", "))
	e.Header = http.Header{"Allow": {strings.Join(allow, ", ")}}
	return e
}

// Conflict is a 409: the request conflicts with the current state.
func Conflict(code, msg string) *Error { return NewError(http.StatusConflict, code, msg) }

// PreconditionFailed is a 412.
func PreconditionFailed(code, msg string) *Error {
	return NewError(http.StatusPreconditionFailed, code, msg)
}

// BodyTooLarge is a 413 body_too_large naming the limit.
func BodyTooLarge(limit int64) *Error {
	e := NewError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
		fmt.Sprintf("request body exceeds %d bytes", limit))
	e.Details = map[string]any{"limit_bytes": limit}
	return e
}

// UnsupportedMediaType is a 415 listing the accepted media types.
func UnsupportedMediaType(accepted ...string) *Error {
	e := NewError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
		"Content-Type must be "+strings.Join(accepted, " or "))
	e.Details = map[string]any{"accepted": accepted}
	return e
}

// FieldProblem is one reason a well-formed request is invalid. Path names
// the offending field (e.g. "streams[0].input.type"), empty for the whole
// body.
type FieldProblem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Validation is a 422 validation_failed with details.errors listing problems.
func Validation(problems []FieldProblem) *Error {
	if problems == nil {
		problems = []FieldProblem{}
	}
	msg := "the request is invalid"
	if len(problems) == 1 {
		msg += ": 1 problem"
	} else {
		msg += fmt.Sprintf(": %d problems", len(problems))
	}
	e := NewError(http.StatusUnprocessableEntity, CodeValidationFailed, msg)
	e.Details = map[string]any{"errors": problems}
	return e
}

// Unavailable is a 503 (unavailable, storage_unavailable, recovering).
func Unavailable(code, msg string) *Error {
	return NewError(http.StatusServiceUnavailable, code, msg)
}
