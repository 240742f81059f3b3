package hub

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// CodeCapacity answers a registration the Hub refuses for admission: the
// remote address registers faster than SVC_HUB_REGISTER_RATE (429), or the
// Hub keeps SVC_HUB_MAX_NODES nodes already (503). It is the spec's stable
// audit failure code of the same name.
const CodeCapacity = "capacity"

// Reasons of a refused registration, as svc_hub_registrations_refused_total
// labels them.
const (
	refusedRate     = "rate"
	refusedMaxNodes = "max_nodes"
)

// Events a node may cause: nodeEventRate a second on average, nodeEventBurst
// at once. Beyond them its stream_state_changed, job_state_changed,
// node_registered and node_restarted events are dropped and counted
// (svc_hub_node_events_dropped_total); what they would have said stays
// readable in the node's and its streams' views.
const (
	nodeEventRate  = 2.0
	nodeEventBurst = 240
)

// maxBucketKeys bounds the keys a bucket set keeps: beyond it, keys not
// seen before share one overflow bucket, so many addresses cannot grow the
// Hub's memory.
const maxBucketKeys = 16384

// overflowKey is the bucket shared by keys beyond maxBucketKeys.
const overflowKey = "\x00overflow"

// buckets is a token bucket per key: rate tokens a second up to burst.
// The zero rate is no limit. mu guards m.
type buckets struct {
	rate  float64
	burst float64

	mu sync.Mutex
	m  map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newBuckets(rate float64, burst int) *buckets {
	return &buckets{rate: rate, burst: float64(burst), m: map[string]*bucket{}}
}

// refillLocked returns key's bucket filled up to now. b.mu is held.
func (b *buckets) refillLocked(key string, now time.Time) *bucket {
	k := b.m[key]
	if k == nil {
		if len(b.m) >= maxBucketKeys {
			b.pruneLocked(now)
		}
		if len(b.m) >= maxBucketKeys {
			key = overflowKey
			k = b.m[key]
		}
		if k == nil {
			k = &bucket{tokens: b.burst, at: now}
			b.m[key] = k
		}
	}
	if now.After(k.at) {
		k.tokens = math.Min(b.burst, k.tokens+now.Sub(k.at).Seconds()*b.rate)
		k.at = now
	}
	return k
}

// pruneLocked drops the buckets that are full again: forgetting them
// changes nothing. b.mu is held.
func (b *buckets) pruneLocked(now time.Time) {
	for key, k := range b.m {
		if k.tokens+now.Sub(k.at).Seconds()*b.rate >= b.burst {
			delete(b.m, key)
		}
	}
}

// take takes up to n tokens of key and returns how many it got; when
// fewer than n, wait is how long until the next token.
func (b *buckets) take(key string, n int, now time.Time) (got int, wait time.Duration) {
	if b.rate <= 0 {
		return n, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.refillLocked(key, now)
	got = min(n, max(int(k.tokens), 0))
	k.tokens -= float64(got)
	if got < n {
		wait = time.Duration((1 - (k.tokens - math.Floor(k.tokens))) / b.rate * float64(time.Second))
	}
	return got, wait
}

// charge takes n tokens of key that were spent already, going into debt
// down to -burst: what the store wrote in one call is paid for afterwards.
func (b *buckets) charge(key string, n int, now time.Time) {
	if b.rate <= 0 || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.refillLocked(key, now)
	k.tokens = math.Max(k.tokens-float64(n), -b.burst)
}

// available reports whether key has a token now, taking none.
func (b *buckets) available(key string, now time.Time) bool {
	if b.rate <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refillLocked(key, now).tokens >= 1
}

// forget drops key's bucket (a forgotten node).
func (b *buckets) forget(key string) {
	b.mu.Lock()
	delete(b.m, key)
	b.mu.Unlock()
}

// admission holds what registration admission remembers: the buckets of
// remote addresses, and when each kind of refusal was last audited.
type admission struct {
	addrs *buckets
	// mu serializes the registrations of new nodes, so that concurrent
	// ones cannot pass SVC_HUB_MAX_NODES together.
	mu sync.Mutex

	auditMu sync.Mutex // guards audited
	// audited is, per refusal key, when it was last audited and how many
	// refusals went unaudited since: a flood of refusals must not become a
	// flood of audit records.
	audited map[string]*auditMark
}

type auditMark struct {
	at         time.Time
	suppressed int
}

// refusalAuditEvery is how often one kind of refusal from one address is
// audited.
const refusalAuditEvery = time.Minute

func newAdmission(s Settings) *admission {
	rate, burst := s.registerLimit()
	return &admission{addrs: newBuckets(rate, burst), audited: map[string]*auditMark{}}
}

// shouldAudit reports whether a refusal of key is audited now, and how many
// refusals of key went unaudited before it.
func (a *admission) shouldAudit(key string, now time.Time) (bool, int) {
	a.auditMu.Lock()
	defer a.auditMu.Unlock()
	m := a.audited[key]
	if m != nil && now.Sub(m.at) < refusalAuditEvery {
		m.suppressed++
		return false, 0
	}
	if m == nil {
		if len(a.audited) >= maxBucketKeys {
			clear(a.audited)
		}
		m = &auditMark{}
		a.audited[key] = m
	}
	n := m.suppressed
	m.at, m.suppressed = now, 0
	return true, n
}

// addressKey is the bucket of a remote address: the IPv4 address, or the
// /64 of an IPv6 one (one host holds a whole /64).
func addressKey(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return host
	case ip.To4() != nil:
		return ip.To4().String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// admitAddress refuses a registration from an address beyond its rate:
// 429 capacity with Retry-After. It runs before the body is read.
func (h *Hub) admitAddress(r *http.Request) error {
	key := addressKey(r.RemoteAddr)
	got, wait := h.admission.addrs.take(key, 1, h.opts.Now())
	if got == 1 {
		return nil
	}
	rate, burst := h.opts.Settings.registerLimit()
	h.refuseRegistration(r, refusedRate, "rate:"+key, "",
		fmt.Sprintf("registrations from %s beyond %s a second (burst %d)", key, strconv.FormatFloat(rate, 'f', -1, 64), burst))
	secs := max(1, int(math.Ceil(wait.Seconds())))
	e := httpapi.NewError(http.StatusTooManyRequests, CodeCapacity,
		fmt.Sprintf("too many registrations from this address (%s); retry in %d s", EnvRegisterRate, secs))
	e.Header = http.Header{"Retry-After": {strconv.Itoa(secs)}}
	return e
}

// admitNode refuses the registration of a node the Hub does not hold
// when it holds SVC_HUB_MAX_NODES already: 503 capacity. A node that is
// registered (re-registering, rebooted) is always admitted. The caller
// holds h.admission.mu until the registration is in the fleet.
func (h *Hub) admitNode(r *http.Request, nodeID string) error {
	limit := h.opts.Settings.maxNodes()
	if limit < 0 {
		return nil
	}
	known, count := h.fleet.Admitted(nodeID)
	if known || count < limit {
		return nil
	}
	h.refuseRegistration(r, refusedMaxNodes, refusedMaxNodes, nodeID, fmt.Sprintf("the Hub holds %d nodes (%s)", count, EnvMaxNodes))
	e := httpapi.Unavailable(CodeCapacity, fmt.Sprintf(
		"the Hub holds its maximum of %d nodes (%s): an operator forgets nodes no longer used, or raises the limit", limit, EnvMaxNodes))
	e.Header = http.Header{"Retry-After": {"60"}}
	return e
}

// refuseRegistration counts a refused registration and audits it, at most
// once a minute per key (the audit message counts those not audited).
// Refusals are not evented: the event log keeps only its newest rows, and
// a flood of refusals would push out the rest.
func (h *Hub) refuseRegistration(r *http.Request, reason, key, nodeID, why string) {
	h.metrics.refused.WithLabelValues(reason).Inc()
	now := h.opts.Now()
	audit, suppressed := h.admission.shouldAudit(key, now)
	if !audit {
		return
	}
	if suppressed > 0 {
		why += fmt.Sprintf("; %d more refused since the last record", suppressed)
	}
	ctx := context.WithoutCancel(r.Context())
	by := actorOf(ctx)
	rec := store.AuditRecord{OccurredAt: wire.At(now), Actor: by.id, ActorKind: by.kind, Action: actionNodeRegister, ResourceType: "node",
		ResourceID: nodeID, NodeID: nodeID, CorrelationID: httpapi.CorrelationID(ctx), Outcome: store.OutcomeRejected, FailureCode: CodeCapacity, Message: why}
	if _, err := h.st.AppendAudit(ctx, rec); err != nil {
		h.storeFailed(err)
	}
	h.log.Warn("hub: registration refused: capacity", "reason", reason, "node_id", nodeID, "detail", why)
}

// quietNode reports whether node id spent its event budget: the store
// then writes no event for it.
func (h *Hub) quietNode(id string, now time.Time) bool {
	return !h.nodeEvents.available(id, now)
}

// nodeEventsWritten pays for n events the store wrote for node id, or
// counts them dropped when it was quiet.
func (h *Hub) nodeEventsWritten(id string, n int, quiet bool, now time.Time) {
	if quiet {
		h.metrics.eventsDropped.Add(float64(n))
		return
	}
	h.nodeEvents.charge(id, n, now)
}

// budgetEvents keeps the events of node id its budget allows, and counts
// the rest dropped.
func (h *Hub) budgetEvents(id string, evs []wire.Event, now time.Time) []wire.Event {
	got, _ := h.nodeEvents.take(id, len(evs), now)
	if got < len(evs) {
		h.metrics.eventsDropped.Add(float64(len(evs) - got))
	}
	return evs[:got]
}
