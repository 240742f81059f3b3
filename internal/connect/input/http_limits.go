package input

import (
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/component"
)

// Defaults of the bounds of the http input.
const (
	DefaultHTTPMaxPendingRequests = 64
	DefaultHTTPAckTimeout         = "30s"
	// httpRetryAfter is the Retry-After, in seconds, of every 503 answer.
	httpRetryAfter = 1
)

// HTTPLimits bounds what the http input holds: requests waiting for their
// batch to be accepted, and how long each waits.
type HTTPLimits struct {
	MaxPendingRequests int    `json:"max_pending_requests"`
	AckTimeout         string `json:"ack_timeout"`
}

func defaultHTTPLimits() HTTPLimits {
	return HTTPLimits{MaxPendingRequests: DefaultHTTPMaxPendingRequests, AckTimeout: DefaultHTTPAckTimeout}
}

// withHTTPLimitProps adds the schema properties of HTTPLimits to props.
func withHTTPLimitProps(props map[string]any) map[string]any {
	out := maps.Clone(props)
	out["max_pending_requests"] = func() map[string]any {
		p := component.Prop("integer", "Most requests held at once while their batch waits to be accepted "+
			"(bodies included, so at most max_pending_requests x max_body_bytes are held). A request beyond it "+
			"is answered 503 with Retry-After at once.", DefaultHTTPMaxPendingRequests)
		p["minimum"] = 1
		return p
	}()
	out["ack_timeout"] = component.DurationProp("Longest a request waits for the stream to accept its batch; "+
		"it is then answered 503 with Retry-After (the batch may still be delivered later, so a retry can "+
		"duplicate it: at-least-once).", DefaultHTTPAckTimeout)
	return out
}

// check validates l and returns the parsed ack timeout.
func (l HTTPLimits) check() (time.Duration, []error) {
	var errs []error
	if l.MaxPendingRequests < 1 {
		errs = append(errs, fmt.Errorf("max_pending_requests: must be at least 1, got %d", l.MaxPendingRequests))
	}
	d, err := time.ParseDuration(l.AckTimeout)
	if err != nil || d <= 0 {
		errs = append(errs, fmt.Errorf("ack_timeout: %q is not a positive duration such as \"30s\"", l.AckTimeout))
	}
	return d, errs
}

var (
	errBusy = &httpError{http.StatusServiceUnavailable,
		"too many requests waiting for the stream (max_pending_requests); retry later"}
	errAckTimeout = &httpError{http.StatusServiceUnavailable,
		"the stream did not accept the data within ack_timeout; retry later (it may still be delivered)"}
)

// setRetryAfter tells a client answered 503 when to try again.
func setRetryAfter(w http.ResponseWriter, he *httpError) {
	if he.code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(httpRetryAfter))
	}
}

// hold takes one of the max_pending_requests places, reporting false when
// none is free; release gives it back (it may be called more than once).
func (h *HTTP) hold() (release func(), ok bool) {
	select {
	case h.pending <- struct{}{}:
		return sync.OnceFunc(func() { <-h.pending }), true
	default:
		return nil, false
	}
}
