package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// maxResponseBytes caps what the Agent reads of a Hub answer.
const maxResponseBytes = 4 << 20

// errNodeTokenRejected is a register answered 401: the node token is wrong.
var errNodeTokenRejected = errors.New("the Hub rejected the node token (401 unauthorized); check health_check.node_token")

// errNoSession wraps the error of a call that found no Hub to register
// with; the register round has logged it already.
var errNoSession = errors.New("not registered with a Hub")

// statusError is a Hub answer other than 2xx. Its text holds the problem's
// code and message, never a credential.
type statusError struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is the answer's Retry-After in seconds (0 when absent):
	// a Hub refusing for capacity says when to come back.
	RetryAfter time.Duration
}

// maxRetryAfter caps a Hub's Retry-After: a wrong or hostile answer must
// not park the Agent for long.
const maxRetryAfter = 5 * time.Minute

func (e *statusError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("hub answered %d", e.Status)
	}
	return fmt.Sprintf("hub answered %d %s: %s", e.Status, e.Code, e.Message)
}

// failover reports whether an error means the Hub is unusable and the next
// URL should be tried: no answer (connection failure, timeout) or a 5xx.
func failover(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.Status >= 500
	}
	return err != nil
}

// session is one registration with one Hub.
type session struct {
	hub          int // index in client.bases
	token        string
	registeredAt time.Time
	expiresAt    time.Time
	refreshAt    time.Time // re-register from then on
	heartbeat    time.Duration
}

// refreshTime is when a session registered at now and expiring at
// expiresAt (by the Hub's clock) is renewed: before it expires by a tenth
// of its life (at most a minute), its life being capped by the configured
// session TTL so that a skewed Hub clock cannot stretch it.
func refreshTime(now, expiresAt time.Time, ttl time.Duration) time.Time {
	life := expiresAt.Sub(now)
	if life <= 0 || ttl > 0 && life > ttl {
		life = ttl
	}
	margin := min(life/10, time.Minute)
	return now.Add(life - margin)
}

// client speaks the agent protocol with the configured Hubs: it owns the
// session and the choice of Hub. Its methods are safe for concurrent use.
type client struct {
	urls      []string // as configured, for display (redacted)
	bases     []string // agent route prefixes, same order
	nodeToken string
	httpc     *http.Client
	log       *slog.Logger
	now       func() time.Time
	backoff   backoff
	timeout   time.Duration // per request, long-polls add their wait
	ttl       time.Duration // configured session TTL
	leaseTTL  time.Duration
	// registerBody is the body of each register; onRegister runs after
	// each successful one.
	registerBody func() wire.RegisterRequest
	onRegister   func()
	// identityRetry is the wait after a round the Hub refused for the
	// node's identity (DefaultIdentityRetry).
	identityRetry time.Duration
	// epochs is the highest Hub leader epoch seen (register and heartbeat
	// answers, commands).
	epochs *epochs

	regSem chan struct{} // buffered(1): held while a register round runs

	mu        sync.Mutex // guards the fields below
	cur       int        // index of the Hub in use, or tried first
	sess      *session   // nil: not registered
	connected bool
	failures  int       // consecutive failed register rounds
	nextRound time.Time // no register round before
	lastErr   string
	lastErrAt time.Time
	// refused: the last round ended in 403 node_identity_mismatch, logged
	// once until a registration succeeds.
	refused bool
}

// ensure returns a usable session, registering when there is none or the
// current one is due for renewal. After a round in which every Hub failed,
// the next round waits for the backoff (a still valid session is used
// meanwhile).
func (c *client) ensure(ctx context.Context) (*session, error) {
	if s := c.current(false); s != nil {
		return s, nil
	}
	select {
	case c.regSem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.regSem }()
	if s := c.current(false); s != nil {
		return s, nil // another caller registered meanwhile
	}
	c.mu.Lock()
	wait := c.nextRound.Sub(c.now())
	c.mu.Unlock()
	if wait > 0 {
		if s := c.current(true); s != nil {
			return s, nil // due for renewal, still valid: renew after the backoff
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	s, err := c.registerRound(ctx)
	if err != nil {
		if old := c.current(true); old != nil {
			return old, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %w", errNoSession, err)
	}
	return s, nil
}

// current returns the session if it needs no renewal (or, with
// stillValid, if it has not expired).
func (c *client) current(stillValid bool) *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sess
	if s == nil {
		return nil
	}
	limit := s.refreshAt
	if stillValid {
		limit = s.expiresAt
	}
	if c.now().Before(limit) {
		return s
	}
	return nil
}

// registerRound tries to register with every Hub once, in order from the
// current one, and keeps the first session obtained.
func (c *client) registerRound(ctx context.Context) (*session, error) {
	c.mu.Lock()
	start, streak := c.cur, c.failures > 0
	c.mu.Unlock()
	var err error
	for i := range c.bases {
		idx := (start + i) % len(c.bases)
		var s *session
		s, err = c.register(ctx, idx)
		if err == nil {
			c.mu.Lock()
			c.cur, c.sess, c.connected, c.failures, c.nextRound, c.refused = idx, s, true, 0, time.Time{}, false
			c.mu.Unlock()
			c.log.Info("registered with the Hub", "hub_url", redactURL(c.urls[idx]), "session_expires_at", s.expiresAt, "heartbeat_interval", s.heartbeat)
			if c.onRegister != nil {
				c.onRegister()
			}
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.noteError(err)
		var ie *identityError
		switch {
		case errors.As(err, &ie):
			// Every Hub shares the store: the others would say the same.
			return nil, c.identityRefused(err)
		case errors.Is(err, errNodeTokenRejected):
			c.log.Error("register refused", "hub_url", redactURL(c.urls[idx]), "err", err)
		case streak: // the round's summary says it again
			c.log.Debug("register failed", "hub_url", redactURL(c.urls[idx]), "err", err)
		default:
			c.log.Warn("register failed", "hub_url", redactURL(c.urls[idx]), "err", err)
		}
	}
	c.mu.Lock()
	c.failures++
	wait := c.backoff.delay(c.failures)
	if se := (*statusError)(nil); errors.As(err, &se) {
		// A Hub refusing for capacity (429, 503) says when to come back:
		// not sooner than that.
		wait = max(wait, se.RetryAfter)
	}
	c.nextRound = c.now().Add(wait)
	c.connected = false
	c.mu.Unlock()
	c.log.Warn("no Hub accepted the registration; retrying", "hubs", len(c.bases), "retry_in", wait, "err", err)
	return nil, err
}

// identityRefused ends a register round the Hub refused for the node's
// identity: logged at error level once, and retried after identityRetry
// rather than the backoff (only an operator can fix it).
func (c *client) identityRefused(err error) error {
	c.mu.Lock()
	c.failures++
	c.nextRound = c.now().Add(c.identityRetry)
	c.connected = false
	first := !c.refused
	c.refused = true
	c.mu.Unlock()
	if first {
		c.log.Error("register refused: node identity mismatch", "err", err, "retry_every", c.identityRetry)
	} else {
		c.log.Debug("register refused again: node identity mismatch", "retry_in", c.identityRetry)
	}
	return err
}

func (c *client) register(ctx context.Context, idx int) (*session, error) {
	var resp wire.RegisterResponse
	body := c.registerBody()
	err := c.do(ctx, idx, http.MethodPost, "/agent/register", c.nodeToken, body, &resp, c.timeout)
	var se *statusError
	if errors.As(err, &se) && se.Status == http.StatusUnauthorized {
		return nil, errNodeTokenRejected
	}
	if errors.As(err, &se) && se.Status == http.StatusForbidden && se.Code == codeNodeIdentityMismatch {
		return nil, &identityError{nodeID: body.NodeID, message: se.Message}
	}
	if err != nil {
		return nil, err
	}
	if resp.SessionToken == "" {
		return nil, errors.New("hub answered register without a session token")
	}
	c.epochs.see(resp.Epoch)
	now := c.now()
	s := &session{hub: idx, token: resp.SessionToken, registeredAt: now, expiresAt: resp.SessionExpiresAt.Time}
	if s.expiresAt.IsZero() {
		s.expiresAt = now.Add(c.ttl)
	}
	s.refreshAt = refreshTime(now, s.expiresAt, c.ttl)
	s.heartbeat = time.Duration(resp.HeartbeatIntervalMS) * time.Millisecond
	if s.heartbeat <= 0 {
		lease := time.Duration(resp.LeaseTTLMS) * time.Millisecond
		if lease <= 0 {
			lease = c.leaseTTL
		}
		s.heartbeat = lease / 3
	}
	return s, nil
}

// call sends one agent call with the session token, registering first when
// needed. A 401 drops the session and the call is retried after a
// transparent re-register; a connection failure, timeout or 5xx moves to
// the next Hub (re-registering there) and retries once per Hub. extra is
// added to the request timeout (long-polls).
func (c *client) call(ctx context.Context, method, path string, body, out any, extra time.Duration) error {
	var err error
	for range len(c.bases) + 2 {
		var s *session
		s, err = c.ensure(ctx)
		if err != nil {
			return err
		}
		err = c.do(ctx, s.hub, method, path, s.token, body, out, c.timeout+extra)
		var se *statusError
		switch {
		case err == nil:
			c.mu.Lock()
			c.connected = true
			c.mu.Unlock()
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &se) && se.Status == http.StatusUnauthorized:
			c.drop(s, false)
			c.log.Debug("session expired; registering again", "code", se.Code)
		case failover(err):
			c.noteError(err)
			c.drop(s, true)
			c.log.Warn("hub unavailable; trying the next one", "hub_url", redactURL(c.urls[s.hub]), "err", err)
		default:
			return err
		}
	}
	return err
}

// drop forgets s if it is still the session (another caller may have
// replaced it already); with next, the next Hub is tried first.
func (c *client) drop(s *session, next bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != s {
		return
	}
	c.sess = nil
	if next {
		c.cur = (s.hub + 1) % len(c.bases)
		c.connected = false
	}
}

func (c *client) noteError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastErr, c.lastErrAt = err.Error(), c.now()
}

// do sends one request to Hub idx with the bearer token and decodes a 2xx
// answer into out. A non-2xx answer is a *statusError.
func (c *client) do(ctx context.Context, idx int, method, path, token string, body, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.bases[idx]+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	if body != nil || method != http.MethodGet {
		// The Hub answers 415 to a mutation without a JSON Content-Type,
		// bodiless ones included.
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.httpc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := &statusError{Status: resp.StatusCode}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			se.RetryAfter = min(time.Duration(secs)*time.Second, maxRetryAfter)
		}
		var p wire.Problem
		if json.Unmarshal(data, &p) == nil {
			se.Code, se.Message = p.Code, p.Message
		}
		return se
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// unwrapURLError drops the *url.Error wrapper (it repeats method and URL).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// status is the client's view for GET /system.
func (c *client) status() (hubURL string, connected bool, s session, lastErr string, lastErrAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil {
		s = *c.sess
	}
	return redactURL(c.urls[c.cur]), c.connected, s, c.lastErr, c.lastErrAt
}
