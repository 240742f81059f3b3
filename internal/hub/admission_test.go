package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

func TestBuckets(t *testing.T) {
	type step struct {
		at       time.Duration // since t0
		take     int           // tokens asked for; 0 with charge
		charge   int
		wantGot  int
		wantWait time.Duration
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		rate  float64
		burst int
		steps []step
	}{
		{"burst then refill", 2, 3, []step{
			{at: 0, take: 3, wantGot: 3},
			{at: 0, take: 1, wantGot: 0, wantWait: 500 * time.Millisecond},
			{at: 500 * time.Millisecond, take: 2, wantGot: 1, wantWait: 500 * time.Millisecond},
			{at: 10 * time.Second, take: 5, wantGot: 3, wantWait: 500 * time.Millisecond},
		}},
		{"no limit", 0, 0, []step{{at: 0, take: 1000, wantGot: 1000}}},
		{"debt is paid before tokens come back", 1, 2, []step{
			{at: 0, charge: 10},
			// Charged into debt down to -burst: 4 s to reach 2 tokens.
			{at: 3 * time.Second, take: 2, wantGot: 1, wantWait: time.Second},
			{at: 5 * time.Second, take: 2, wantGot: 2},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBuckets(c.rate, c.burst)
			for i, s := range c.steps {
				now := t0.Add(s.at)
				if s.charge > 0 {
					b.charge("k", s.charge, now)
					continue
				}
				got, wait := b.take("k", s.take, now)
				if got != s.wantGot || wait != s.wantWait {
					t.Fatalf("step %d: got %d wait %v, want %d wait %v", i, got, wait, s.wantGot, s.wantWait)
				}
			}
		})
	}
}

// TestBucketsBoundKeys: keys beyond maxBucketKeys share one bucket, so a
// flood of addresses cannot grow the map.
func TestBucketsBoundKeys(t *testing.T) {
	b := newBuckets(1, 1)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxBucketKeys + 100 {
		b.take(fmt.Sprint("k", i), 1, now)
	}
	if len(b.m) > maxBucketKeys+1 {
		t.Fatalf("%d buckets, want at most %d", len(b.m), maxBucketKeys+1)
	}
	if got, _ := b.take("another", 1, now); got != 0 {
		t.Fatal("a new key beyond the bound got a fresh bucket")
	}
	// Once the buckets are full again, they are forgotten and new keys
	// get their own.
	if got, _ := b.take("later", 1, now.Add(time.Hour)); got != 1 {
		t.Fatal("a new key after the others refilled got no token")
	}
}

func TestAddressKey(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5000":                "127.0.0.1",
		"[::ffff:10.0.0.1]:1":           "10.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:443":    "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443":    "2001:db8:1:2::/64",
		"not an address":                "not an address",
		"[fe80::1%eth0]:80":             "fe80::1%eth0",
		"192.0.2.1":                     "192.0.2.1",
		"[2001:db8:1:3::]:1":            "2001:db8:1:3::/64",
		"[::1]:8080":                    "::/64",
		"10.1.2.3:65535":                "10.1.2.3",
		"[2001:db8::1]:1":               "2001:db8::/64",
		"[2001:db8:0:0:1:0:0:1]:1":      "2001:db8::/64",
		"[2001:db8:aaaa:bbbb:1::1]:900": "2001:db8:aaaa:bbbb::/64",
	} {
		if got := addressKey(in); got != want {
			t.Errorf("addressKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// newAdmissionHub is a clock Hub with settings s (address, storage and
// clock filled in).
func newAdmissionHub(t testing.TB, s Settings) *clockHub {
	t.Helper()
	clock := &fakeClock{now: c0}
	s.Address, s.Storage = "127.0.0.1:0", dbPath(t)
	h, err := New(context.Background(), Options{Settings: s, Logger: slog.New(slog.DiscardHandler), Now: clock.Now, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return &clockHub{h: h, clock: clock}
}

func registerBody(node string, caps ...string) string {
	if caps == nil {
		caps = []string{"stream_control"}
	}
	b, _ := jsonMarshal(wire.RegisterRequest{NodeID: node, BootID: "b", ProtocolVersion: wire.ProtocolVersion, Capabilities: caps,
		LeaseTTLMS: 36000000, NodeCredential: credentialOf(node)})
	return b
}

// capacityAudits returns the audit records of registrations refused for
// capacity.
func capacityAudits(t testing.TB, h *Hub) []store.AuditRecord {
	t.Helper()
	pg, err := h.st.ListAudit(context.Background(), store.AuditFilter{Action: actionNodeRegister, Outcome: store.OutcomeRejected},
		store.Paging{Page: 1, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []store.AuditRecord
	for _, r := range pg.Items {
		if r.FailureCode == CodeCapacity {
			out = append(out, r)
		}
	}
	return out
}

// TestRegisterRate: one address registers a burst, then is refused with
// 429 capacity and Retry-After until tokens come back; the refusals are
// counted, and audited once a minute.
func TestRegisterRate(t *testing.T) {
	c := newAdmissionHub(t, Settings{RegisterRate: 1, RegisterBurst: 3})
	for i := range 3 {
		if rec := c.do(t, "POST", APIPrefix+"/agent/register", registerBody(fmt.Sprint("n", i)), ""); rec.Code != 200 {
			t.Fatalf("registration %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	for i := range 5 {
		rec := c.do(t, "POST", APIPrefix+"/agent/register", registerBody("n9"), "")
		if rec.Code != http.StatusTooManyRequests || recDecode[wire.Problem](t, rec).Code != CodeCapacity {
			t.Fatalf("refusal %d: %d %s", i, rec.Code, rec.Body)
		}
		if got := rec.Header().Get("Retry-After"); got != "1" {
			t.Fatalf("Retry-After %q, want 1", got)
		}
	}
	// An invalid body from the same address is refused for the rate
	// before it is read.
	if rec := c.do(t, "POST", APIPrefix+"/agent/register", `{"not":"read"}`, ""); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("invalid body: %d %s", rec.Code, rec.Body)
	}
	if a := capacityAudits(t, c.h); len(a) != 1 || !strings.Contains(a[0].Message, "192.0.2.1") {
		t.Fatalf("audit after 6 refusals in a minute: %+v", a)
	}
	c.clock.set(c0.Add(time.Minute))
	if rec := c.do(t, "POST", APIPrefix+"/agent/register", registerBody("n9"), ""); rec.Code != 200 {
		t.Fatalf("after a minute: %d %s", rec.Code, rec.Body)
	}
	for range 3 {
		c.do(t, "POST", APIPrefix+"/agent/register", registerBody("n9"), "")
	}
	a := capacityAudits(t, c.h)
	if len(a) != 2 || !strings.Contains(a[0].Message, "5 more refused since the last record") {
		t.Fatalf("audit a minute later: %+v", a)
	}
	if got := counterValue(t, c.h, "svc_hub_registrations_refused_total", "reason", refusedRate); got != 7 {
		t.Fatalf("refused counter %v, want 7", got)
	}
}

// TestMaxNodes: beyond SVC_HUB_MAX_NODES a new node is refused with 503
// capacity; a known node registers again (also with a new boot); a
// forgotten node frees its place.
func TestMaxNodes(t *testing.T) {
	c := newAdmissionHub(t, Settings{MaxNodes: 2, RegisterRate: -1})
	reg := func(node string) int {
		return c.do(t, "POST", APIPrefix+"/agent/register", registerBody(node), "").Code
	}
	if reg("n1") != 200 || reg("n2") != 200 {
		t.Fatal("the first two nodes were refused")
	}
	// Desired state for a node that never registered does not count.
	if rec := c.do(t, "PUT", APIPrefix+"/nodes/n5/streams/s1/desired-state", `{"state":"running"}`, ""); rec.Code != 202 {
		t.Fatalf("PUT: %d %s", rec.Code, rec.Body)
	}
	rec := c.do(t, "POST", APIPrefix+"/agent/register", registerBody("n3"), "")
	if rec.Code != http.StatusServiceUnavailable || recDecode[wire.Problem](t, rec).Code != CodeCapacity {
		t.Fatalf("third node: %d %s", rec.Code, rec.Body)
	}
	for range 3 {
		if reg("n1") != 200 {
			t.Fatal("a known node was refused")
		}
	}
	if a := capacityAudits(t, c.h); len(a) != 1 || a[0].NodeID != "n3" {
		t.Fatalf("audit: %+v", a)
	}
	if rec := c.do(t, "DELETE", APIPrefix+"/nodes/n2?force=true", "", ""); rec.Code != 204 {
		t.Fatalf("forget: %d %s", rec.Code, rec.Body)
	}
	if reg("n3") != 200 {
		t.Fatal("a node was refused after another was forgotten")
	}
	if reg("n2") != http.StatusServiceUnavailable {
		t.Fatal("the forgotten node came back beyond the limit")
	}
	if got := counterValue(t, c.h, "svc_hub_registrations_refused_total", "reason", refusedMaxNodes); got != 2 {
		t.Fatalf("refused counter %v, want 2", got)
	}
}

// TestAgentPayloadBounds: what the Hub would store beyond its bounds is
// refused whole with 422 naming the field.
func TestAgentPayloadBounds(t *testing.T) {
	c := newAdmissionHub(t, Settings{RegisterRate: -1})
	session := c.register(t, "n1")
	long := strings.Repeat("x", maxFieldLen+1)
	manyCaps := make([]string, maxCapabilities+1)
	for i := range manyCaps {
		manyCaps[i] = fmt.Sprint("cap", i)
	}
	streams := func(n int, f func(*wire.ReportStream)) []wire.ReportStream {
		out := make([]wire.ReportStream, n)
		for i := range out {
			out[i] = wire.ReportStream{ID: fmt.Sprint("s", i), State: "running"}
			if f != nil {
				f(&out[i])
			}
		}
		return out
	}
	report := func(r wire.Report) string {
		r.BootID, r.ReportSeq = "b", 1
		b, _ := jsonMarshal(r)
		return b
	}
	cases := []struct {
		name, path, body, token, wantPath string
	}{
		{"capabilities count", "/register", registerBody("n2", manyCaps...), "", "capabilities"},
		{"capability shape", "/register", registerBody("n2", "stream_control", "bad cap\n"), "", "capabilities[1]"},
		{"capability length", "/register", registerBody("n2", strings.Repeat("c", 129)), "", "capabilities[0]"},
		{"version", "/register", strings.Replace(registerBody("n2"), `"version":""`, `"version":"`+long+`"`, 1), "", "version"},
		{"heartbeat capabilities", "/heartbeat", `{"boot_id":"b","capabilities":["a b"]}`, session, "capabilities[0]"},
		{"heartbeat data address", "/heartbeat", `{"boot_id":"b","capabilities":[],"data_address":"` + long + `"}`, session, "data_address"},
		{"streams", "/report", report(wire.Report{Streams: streams(store.MaxReportStreams+1, nil)}), session, "streams"},
		{"stream id", "/report", report(wire.Report{Streams: streams(2, func(s *wire.ReportStream) { s.ID = "a/" + s.ID })}), session, "streams[0].id"},
		{"stream twice", "/report", report(wire.Report{Streams: streams(3, func(s *wire.ReportStream) { s.ID = "same" })}), session, "streams"},
		{"stream state", "/report", report(wire.Report{Streams: streams(1, func(s *wire.ReportStream) { s.State = long })}), session, "streams[0].state"},
		{"stream config version", "/report", report(wire.Report{Streams: streams(1, func(s *wire.ReportStream) { s.ConfigVersion = long })}), session, "streams[0].config_version"},
		{"stream action id", "/report", report(wire.Report{Streams: streams(1, func(s *wire.ReportStream) { s.ActionID = long })}), session, "streams[0].action_id"},
		{"configuration version", "/report", report(wire.Report{ConfigurationVersion: long}), session, "configuration_version"},
		{"node version", "/report", report(wire.Report{Configuration: &wire.ReportConfiguration{NodeVersion: long}}), session, "configuration.node_version"},
		{"metric name", "/report", report(wire.Report{Metrics: map[string]float64{`a{b="c"}`: 1}}), session, "metrics"},
		{"metric name length", "/report", report(wire.Report{Metrics: map[string]float64{strings.Repeat("m", 129): 1}}), session, "metrics"},
		{"metrics count", "/report", report(wire.Report{Metrics: func() map[string]float64 {
			m := map[string]float64{}
			for i := range store.MaxReportMetrics + 1 {
				m[fmt.Sprint("m", i)] = 1
			}
			return m
		}()}), session, "metrics"},
		{"job state", "/job-observations", `{"boot_id":"b","report_seq":1,"jobs":[{"id":"j","state":"` + long + `","tasks":[]}]}`, session, "jobs[0].state"},
		{"job action id", "/job-observations", `{"boot_id":"b","report_seq":1,"jobs":[{"id":"j","state":"running","action_id":"` + long + `","tasks":[]}]}`, session, "jobs[0].action_id"},
		{"job boot id", "/job-observations", `{"boot_id":"` + long + `","report_seq":1,"jobs":[]}`, session, "boot_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := c.do(t, "POST", APIPrefix+"/agent"+tc.path, tc.body, tc.token)
			if rec.Code != http.StatusUnprocessableEntity {
				t.Fatalf("%d %.300s", rec.Code, rec.Body)
			}
			p := recDecode[struct {
				Code    string `json:"code"`
				Details struct {
					Errors []struct{ Path string } `json:"errors"`
				} `json:"details"`
			}](t, rec)
			if p.Code != "validation_failed" || len(p.Details.Errors) == 0 || p.Details.Errors[0].Path != tc.wantPath {
				t.Fatalf("problem %+v, want path %s", p, tc.wantPath)
			}
		})
	}
	// Nothing of the refused bodies was stored.
	n, _ := c.h.fleet.Node("n1")
	if len(n.Observed) != 0 || len(n.Capabilities) != 1 {
		t.Fatalf("stored after refusals: %d streams, capabilities %v", len(n.Observed), n.Capabilities)
	}
	if _, known := c.h.fleet.Node("n2"); known {
		t.Fatal("a refused registration was stored")
	}
	// At the bounds, a report is taken, its last_error cut.
	rec := c.do(t, "POST", APIPrefix+"/agent/report", report(wire.Report{Streams: streams(store.MaxReportStreams, func(s *wire.ReportStream) {
		s.LastError = strings.Repeat("e", 2000)
	})}), session)
	if rec.Code != http.StatusNoContent {
		t.Fatalf("a report at the bounds: %d %.300s", rec.Code, rec.Body)
	}
	n, _ = c.h.fleet.Node("n1")
	if len(n.Observed) != store.MaxReportStreams || len(n.Observed[0].LastError) != maxErrorLen {
		t.Fatalf("stored %d streams, last_error of %d bytes", len(n.Observed), len(n.Observed[0].LastError))
	}
}

// TestNodeEventBudget: a node flipping all its streams' states at every
// report causes at most its budget of events; the rest are counted.
func TestNodeEventBudget(t *testing.T) {
	c := newAdmissionHub(t, Settings{RegisterRate: -1})
	session := c.register(t, "n1")
	const streams, reports = 200, 10
	for seq := range reports {
		rep := wire.Report{BootID: "b", ReportSeq: int64(seq + 1)}
		state := []string{"running", "stopped"}[seq%2]
		for i := range streams {
			rep.Streams = append(rep.Streams, wire.ReportStream{ID: fmt.Sprint("s", i), State: state})
		}
		b, _ := jsonMarshal(rep)
		if rec := c.do(t, "POST", APIPrefix+"/agent/report", b, session); rec.Code != http.StatusNoContent {
			t.Fatalf("report %d: %d %s", seq, rec.Code, rec.Body)
		}
	}
	evs, err := c.h.st.EventsAfter(context.Background(), 0, store.EventFilter{Kind: wire.EventStreamStateChanged}, store.MaxEvents)
	if err != nil {
		t.Fatal(err)
	}
	// The clock stands still: the burst is all the node gets (less the
	// node_registered event).
	if len(evs) != nodeEventBurst-1 {
		t.Fatalf("%d stream events, want %d", len(evs), nodeEventBurst-1)
	}
	dropped := counterValue(t, c.h, "svc_hub_node_events_dropped_total", "", "")
	if want := float64(streams*reports - (nodeEventBurst - 1)); dropped != want {
		t.Fatalf("dropped %v, want %v", dropped, want)
	}
	// A minute later the node has its rate's worth again.
	c.clock.set(c0.Add(time.Minute))
	b, _ := jsonMarshal(wire.Report{BootID: "b", ReportSeq: reports + 1, Streams: []wire.ReportStream{{ID: "s0", State: "failed"}}})
	if rec := c.do(t, "POST", APIPrefix+"/agent/report", b, session); rec.Code != http.StatusNoContent {
		t.Fatalf("report: %d %s", rec.Code, rec.Body)
	}
	after, err := c.h.st.EventsAfter(context.Background(), 0, store.EventFilter{Kind: wire.EventStreamStateChanged, ResourceID: "s0"}, store.MaxEvents)
	if err != nil {
		t.Fatal(err)
	}
	if last := after[len(after)-1]; last.Data["state"] != "failed" {
		t.Fatalf("the event after a minute is missing: %+v", last)
	}
}

func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// counterValue is the value of the Hub's series name (with label=value
// when label is set) on the open registry.
func counterValue(t testing.TB, h *Hub, name, label, value string) float64 {
	t.Helper()
	mfs, err := h.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == label && l.GetValue() == value }) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, label, value)
	return 0
}
