package eventlog

import (
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/wire"
)

// Errors a caller maps to 400 problems: ErrInvalidQuery to invalid_query,
// ErrInvalidHeader to invalid_header.
var (
	ErrInvalidQuery  = errors.New("invalid query parameter")
	ErrInvalidHeader = errors.New("invalid header")
)

// QueryError names a malformed query parameter. It matches ErrInvalidQuery
// under errors.Is. Its text holds the parameter's name, never its value.
type QueryError struct {
	Param  string // the parameter's name, e.g. "since_id"
	Reason string // what a valid value looks like
}

func (e *QueryError) Error() string {
	return "query parameter " + e.Param + ": " + e.Reason
}

// Is reports whether target is ErrInvalidQuery.
func (e *QueryError) Is(target error) bool { return target == ErrInvalidQuery }

// Filter selects events. Its zero value matches every event. Each field is
// named after the query parameter FilterFromQuery reads it from, which is
// named after the event field it tests; set fields must all match.
type Filter struct {
	// Kinds (kind) matches events whose kind is any of these.
	Kinds []string
	// NodeID (node_id), ResourceID (resource_id), OperationID
	// (operation_id) and CorrelationID (correlation_id) match the event
	// field exactly.
	NodeID        string
	ResourceID    string
	OperationID   string
	CorrelationID string
	// AfterID (since_id, or its alias after) matches events whose id is
	// above it: a client passes the newest id it has seen.
	AfterID int64
	// Since (since) matches events that occurred at or after it.
	Since time.Time
	// Visible, when set, is a filter no query sets: the Hub hides the
	// events of resources outside a principal's scopes.
	Visible func(wire.Event) bool
}

// Match reports whether ev passes f.
func (f Filter) Match(ev wire.Event) bool { return f.match(&ev) }

func (f *Filter) match(ev *wire.Event) bool {
	switch {
	case ev.ID <= f.AfterID,
		len(f.Kinds) > 0 && !slices.Contains(f.Kinds, ev.Kind),
		f.NodeID != "" && ev.NodeID != f.NodeID,
		f.ResourceID != "" && ev.ResourceID != f.ResourceID,
		f.OperationID != "" && ev.OperationID != f.OperationID,
		f.CorrelationID != "" && ev.CorrelationID != f.CorrelationID,
		!f.Since.IsZero() && ev.OccurredAt.Before(f.Since),
		f.Visible != nil && !f.Visible(*ev):
		return false
	}
	return true
}

// FilterParams are the query parameters FilterFromQuery reads, for the API
// documents of GET /events and the SSE stream.
var FilterParams = []httpapi.Param{
	{Name: "kind", Description: "Comma-separated event kinds; may repeat; matches any of them."},
	{Name: "node_id", Description: "Exact node id."},
	{Name: "resource_id", Description: "Exact resource id (stream id, job id, \"configuration\", ...)."},
	{Name: "operation_id", Description: "Exact operation id."},
	{Name: "correlation_id", Description: "Exact correlation id."},
	{Name: "since_id", Type: "integer", Description: "Events with an id above this one."},
	{Name: "after", Type: "integer", Description: "Alias of since_id."},
	{Name: "since", Description: "Events that occurred at or after this RFC 3339 time."},
}

// FilterFromQuery reads a Filter from the query parameters of GET /events
// and of the SSE stream:
//
//	kind            comma-separated kinds; may repeat; matches any of them
//	node_id         exact node id
//	resource_id     exact resource id (stream id, job id, "configuration", ...)
//	operation_id    exact operation id
//	correlation_id  exact correlation id
//	since_id        events with an id above this non-negative integer
//	after           alias of since_id; if both are given they must be equal
//	since           events that occurred at or after this RFC 3339 time
//
// Values are taken as given (kinds are trimmed of spaces). An empty value
// leaves its filter unset. Other parameters (page, page_size,
// last_event_id, ...) are ignored. A malformed value, or a single-valued
// parameter given twice, yields a *QueryError.
func FilterFromQuery(q url.Values) (Filter, error) {
	var f Filter
	for _, v := range q["kind"] {
		for k := range strings.SplitSeq(v, ",") {
			if k = strings.TrimSpace(k); k != "" && !slices.Contains(f.Kinds, k) {
				f.Kinds = append(f.Kinds, k)
			}
		}
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{
		{"node_id", &f.NodeID},
		{"resource_id", &f.ResourceID},
		{"operation_id", &f.OperationID},
		{"correlation_id", &f.CorrelationID},
	} {
		v, err := single(q, p.name)
		if err != nil {
			return Filter{}, err
		}
		*p.dst = v
	}
	var haveID bool
	for _, name := range []string{"since_id", "after"} {
		v, err := single(q, name)
		if err != nil {
			return Filter{}, err
		}
		if v == "" {
			continue
		}
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 0 {
			return Filter{}, &QueryError{Param: name, Reason: "must be a non-negative integer event id"}
		}
		if haveID && id != f.AfterID {
			return Filter{}, &QueryError{Param: name, Reason: "must equal since_id when both are given"}
		}
		f.AfterID, haveID = id, true
	}
	v, err := single(q, "since")
	if err != nil {
		return Filter{}, err
	}
	if v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return Filter{}, &QueryError{Param: "since", Reason: "must be an RFC 3339 timestamp such as 2026-01-02T15:04:05.000Z"}
		}
		f.Since = t
	}
	return f, nil
}

// single returns the one value of a single-valued parameter, "" when absent.
func single(q url.Values, name string) (string, error) {
	vs := q[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", &QueryError{Param: name, Reason: "must be given at most once"}
}

// Values returns f as query parameters that FilterFromQuery reads back into
// an equal Filter, for clients building an events URL.
func (f Filter) Values() url.Values {
	q := url.Values{}
	if len(f.Kinds) > 0 {
		q.Set("kind", strings.Join(f.Kinds, ","))
	}
	for _, p := range []struct{ name, v string }{
		{"node_id", f.NodeID},
		{"resource_id", f.ResourceID},
		{"operation_id", f.OperationID},
		{"correlation_id", f.CorrelationID},
	} {
		if p.v != "" {
			q.Set(p.name, p.v)
		}
	}
	if f.AfterID > 0 {
		q.Set("since_id", strconv.FormatInt(f.AfterID, 10))
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.Format(time.RFC3339Nano))
	}
	return q
}
