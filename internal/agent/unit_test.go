package agent

import (
	"context"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/wire"
)

func TestHubBase(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://hub:8090", "http://hub:8090/api/v1"},
		{"http://hub:8090/", "http://hub:8090/api/v1"},
		{"https://hub.example/custom/prefix/", "https://hub.example/custom/prefix"},
		{"https://user:pw@hub.example/api/v2?x=1#f", "https://hub.example/api/v2"},
	} {
		got, err := hubBase(c.in)
		if err != nil || got != c.want {
			t.Errorf("hubBase(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"ftp://hub", "hub:8090", "http://"} {
		if _, err := hubBase(bad); err == nil {
			t.Errorf("hubBase(%q) accepted", bad)
		}
	}
	if got := redactURL("https://user:pw@hub.example/"); strings.Contains(got, "pw") {
		t.Errorf("redactURL kept the password: %s", got)
	}
}

func TestBackoff(t *testing.T) {
	lo, hi := newBackoff(100*time.Millisecond, 10*time.Second, func() float64 { return 0 }), newBackoff(100*time.Millisecond, 10*time.Second, func() float64 { return 0.999999 })
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000} // ms, upper bound
	for i, w := range want {
		n := i + 1
		w *= time.Millisecond
		if got := lo.delay(n); got != w/2 {
			t.Errorf("delay(%d) low = %v, want %v", n, got, w/2)
		}
		if got := hi.delay(n); got > w || got < w-time.Millisecond {
			t.Errorf("delay(%d) high = %v, want ~%v", n, got, w)
		}
	}
	if d := lo.delay(1000); d != 5*time.Second {
		t.Errorf("delay(1000) = %v: the cap does not hold", d)
	}
	if d := newBackoff(0, 0, nil).delay(1); d < 50*time.Millisecond || d > 100*time.Millisecond {
		t.Errorf("default first delay %v", d)
	}
}

func TestRefreshTime(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		expiresIn time.Duration
		ttl       time.Duration
		want      time.Duration
	}{
		{"an hour: a minute early", time.Hour, time.Hour, time.Hour - time.Minute},
		{"short: a tenth early", time.Second, time.Hour, 900 * time.Millisecond},
		{"hub clock ahead: capped by ttl", 3 * time.Hour, time.Hour, time.Hour - time.Minute},
		{"already expired by the hub's clock: ttl", -time.Second, 10 * time.Second, 9 * time.Second},
	} {
		if got := refreshTime(now, now.Add(c.expiresIn), c.ttl).Sub(now); got != c.want {
			t.Errorf("%s: refresh after %v, want %v", c.name, got, c.want)
		}
	}
}

func TestCapabilities(t *testing.T) {
	comps := []string{"input:generate", "output:drop"}
	if got, want := capabilities(comps, "", false, nil), []string{"stream_control", "config_control", "input:generate", "output:drop"}; !slices.Equal(got, want) {
		t.Errorf("without data plane %v", got)
	}
	if got, want := capabilities(comps, "", true, nil), []string{"stream_control", "config_control", "job_control", "input:generate", "output:drop"}; !slices.Equal(got, want) {
		t.Errorf("with job control %v", got)
	}
	if got := capabilities(comps, "10.0.0.1:7000", false, nil); got[len(got)-1] != wire.CapabilityNetworkShuffle {
		t.Errorf("with data plane %v", got)
	}
	if comps[0] != "input:generate" || len(comps) != 2 {
		t.Errorf("capabilities changed its argument: %v", comps)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestStoreRoundTrip: what a store records is what a new store over the
// same directory reads; the outcome cache keeps the newest maxOutcomes.
func TestStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	st, err := openStore(dir, "n1", discard())
	if err != nil {
		t.Fatal(err)
	}
	d := Desire{State: "stopped", Generation: 3, ConfigVersion: "v1", CommandID: "c0"}
	fail := &wire.Failure{Class: "permanent", Code: "stream_not_found", Message: "no"}
	if err := st.streams.record(Outcome{CommandID: "c0", State: wire.ResultSucceeded}, "a", &d); err != nil {
		t.Fatal(err)
	}
	if err := st.streams.record(Outcome{CommandID: "c1", State: wire.ResultFailed, Failure: fail}, "b", nil); err != nil {
		t.Fatal(err)
	}
	again, err := openStore(dir, "n1", discard())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]Desire{"a": d}, again.streams.all()); diff != "" {
		t.Errorf("desires (-want +got):\n%s", diff)
	}
	if o, ok := again.outcome("c1"); !ok || o.State != wire.ResultFailed || *o.Failure != *fail {
		t.Errorf("outcome c1 = %+v, %v", o, ok)
	}
	if got := o(again.outcome("c0")).result("att-9"); got.AttemptID != "att-9" || got.State != wire.ResultSucceeded {
		t.Errorf("cached result %+v", got)
	}

	for i := range maxOutcomes + 5 {
		again.addLocked(Outcome{CommandID: "x" + strconv.Itoa(i), State: wire.ResultSucceeded})
	}
	if len(again.outcomes) != maxOutcomes {
		t.Errorf("%d outcomes kept", len(again.outcomes))
	}
	// 2 + maxOutcomes+5 recorded: the oldest 7 are gone.
	for _, id := range []string{"c0", "c1", "x0", "x4"} {
		if _, ok := again.outcome(id); ok {
			t.Errorf("%s still cached", id)
		}
	}
	for _, id := range []string{"x5", "x" + strconv.Itoa(maxOutcomes+4)} {
		if _, ok := again.outcome(id); !ok {
			t.Errorf("%s not cached", id)
		}
	}
	if err := again.streams.record(Outcome{CommandID: "last"}, "", nil); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("state directory holds %v, want only %s", entries, stateFileName)
	}
}

func o(out Outcome, _ bool) Outcome { return out }

// TestStoreDiscards: a corrupt file or another node's is moved aside.
func TestStoreDiscards(t *testing.T) {
	for name, content := range map[string]string{
		"corrupt":    "{not json",
		"other node": `{"version":1,"node_id":"n2","streams":{"a":{"state":"stopped","generation":1}},"outcomes":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, stateFileName), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			st, err := openStore(dir, "n1", discard())
			if err != nil {
				t.Fatal(err)
			}
			if len(st.streams.all()) != 0 {
				t.Errorf("desires %v", st.streams.all())
			}
			if _, err := os.Stat(filepath.Join(dir, stateFileName+".discarded")); err != nil {
				t.Errorf("not moved aside: %v", err)
			}
		})
	}
}

func TestChangeKey(t *testing.T) {
	base := wire.Report{ReportSeq: 1, ConfigurationVersion: "v1", Streams: []wire.ReportStream{{ID: "a", State: "running", Counters: &wire.StreamCounters{Sent: 1}}}, Metrics: map[string]float64{"messages_sent": 1}}
	same := base
	same.ReportSeq = 2
	same.Streams = []wire.ReportStream{{ID: "a", State: "running", Counters: &wire.StreamCounters{Sent: 99}}}
	same.Metrics = map[string]float64{"messages_sent": 99}
	if changeKey(base) != changeKey(same) {
		t.Error("counters, metrics or the sequence count as a change")
	}
	for name, mutate := range map[string]func(*wire.ReportStream){
		"state":      func(s *wire.ReportStream) { s.State = "stopped" },
		"generation": func(s *wire.ReportStream) { s.Generation = 2 },
		"action id":  func(s *wire.ReportStream) { s.ActionID = "x" },
		"last error": func(s *wire.ReportStream) { s.LastError = "boom" },
	} {
		r := base
		s := base.Streams[0]
		mutate(&s)
		r.Streams = []wire.ReportStream{s}
		if changeKey(r) == changeKey(base) {
			t.Errorf("a change of %s is not a change", name)
		}
	}
	if base.Streams[0].Counters == nil {
		t.Error("changeKey cleared the report's counters")
	}
}

// TestReporter: on fake time, a burst of changes is one report sent
// debounce after the first; an unchanged observation is sent only each
// period or when forced; a failed send is retried with a new sequence.
func TestReporter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		state := "running"
		type sent struct {
			at    time.Duration
			seq   int64
			state string
		}
		var got []sent
		failNext := false
		start := time.Now()
		build := func() wire.Report {
			mu.Lock()
			defer mu.Unlock()
			return wire.Report{Streams: []wire.ReportStream{{ID: "a", State: state}}}
		}
		send := func(_ context.Context, r wire.Report) error {
			mu.Lock()
			defer mu.Unlock()
			if failNext {
				failNext = false
				return errors.New("hub down")
			}
			got = append(got, sent{time.Since(start), r.ReportSeq, r.Streams[0].State})
			return nil
		}
		set := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			state = s
		}
		r := newReporter(build, send, 20*time.Millisecond, 5*time.Second, newBackoff(100*time.Millisecond, time.Second, func() float64 { return 0 }))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { r.run(ctx); close(done) }()

		synctest.Wait() // the first report, at once
		time.Sleep(time.Second)
		set("stopping")
		r.wake()
		time.Sleep(5 * time.Millisecond)
		set("stopped")
		r.wake()
		time.Sleep(time.Second)
		r.wake() // nothing changed: nothing sent
		time.Sleep(time.Second)
		r.forceSend()
		synctest.Wait()
		time.Sleep(100 * time.Millisecond) // sent after the debounce
		mu.Lock()
		failNext = true
		mu.Unlock()
		set("starting")
		r.wake()
		time.Sleep(time.Second)
		time.Sleep(10 * time.Second) // periodic reports
		cancel()
		<-done

		want := []sent{
			{0, 1, "running"},
			{1020 * time.Millisecond, 2, "stopped"},
			{3025 * time.Millisecond, 3, "stopped"}, // forced
			// seq 4 failed at 3125ms; retried after 50ms
			{3175 * time.Millisecond, 5, "starting"},
			{8175 * time.Millisecond, 6, "starting"}, // periodic
			{13175 * time.Millisecond, 7, "starting"},
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(sent{})); diff != "" {
			t.Errorf("reports (-want +got):\n%s", diff)
		}
	})
}

// fakeHubs is a RoundTripper standing for several Hubs by host: each
// answers by a function of the request; the hosts asked are recorded.
type fakeHubs struct {
	mu     sync.Mutex
	asked  []string
	answer map[string]func(*http.Request) (*http.Response, error)
}

func (f *fakeHubs) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.asked = append(f.asked, r.URL.Host+" "+r.URL.Path)
	h := f.answer[r.URL.Host]
	f.mu.Unlock()
	return h(r)
}

func jsonAnswer(status int, v any) func(*http.Request) (*http.Response, error) {
	return func(r *http.Request) (*http.Response, error) {
		b, _ := json.Marshal(v)
		return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader(string(b))), Header: http.Header{}, Request: r}, nil
	}
}

// TestFailoverOrder: Hubs are tried in order; a dead or 5xx Hub passes to
// the next; a working one is kept; once every Hub failed the next round
// waits for the backoff.
func TestFailoverOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, "/register") {
				return jsonAnswer(200, wire.RegisterResponse{SessionToken: "s-" + r.URL.Host, SessionExpiresAt: wire.At(time.Now().Add(time.Hour)), HeartbeatIntervalMS: 5000})(r)
			}
			return jsonAnswer(200, struct{}{})(r)
		}
		dead := func(*http.Request) (*http.Response, error) { return nil, errors.New("connection refused") }
		f := &fakeHubs{answer: map[string]func(*http.Request) (*http.Response, error){
			"a": dead, "b": jsonAnswer(503, wire.Problem{Code: "unavailable"}), "c": ok,
		}}
		c := &client{
			urls: []string{"http://a", "http://b", "http://c"}, bases: []string{"http://a/api/v1", "http://b/api/v1", "http://c/api/v1"},
			nodeToken: "tok", httpc: &http.Client{Transport: f}, log: discard(), now: time.Now,
			backoff: newBackoff(time.Second, 8*time.Second, func() float64 { return 0 }), timeout: time.Second, ttl: time.Hour, leaseTTL: 15 * time.Second,
			registerBody: func() wire.RegisterRequest { return wire.RegisterRequest{NodeID: "n"} }, regSem: make(chan struct{}, 1),
		}
		ctx := t.Context()
		if err := c.call(ctx, "POST", "/agent/heartbeat", struct{}{}, nil, 0); err != nil {
			t.Fatal(err)
		}
		if err := c.call(ctx, "POST", "/agent/heartbeat", struct{}{}, nil, 0); err != nil {
			t.Fatal(err)
		}
		want := []string{"a /api/v1/agent/register", "b /api/v1/agent/register", "c /api/v1/agent/register", "c /api/v1/agent/heartbeat", "c /api/v1/agent/heartbeat"}
		if diff := cmp.Diff(want, f.asked); diff != "" {
			t.Errorf("asked (-want +got):\n%s", diff)
		}
		if hub, connected, _, _, _ := c.status(); hub != "http://c" || !connected {
			t.Errorf("status %s %v", hub, connected)
		}

		// c fails: the next Hub after it (wrapping) is a, then b; all
		// down, the call fails and the next round waits 500ms (the
		// backoff's first delay with zero jitter).
		f.mu.Lock()
		f.answer["c"] = dead
		f.asked = nil
		f.mu.Unlock()
		start := time.Now()
		if err := c.call(ctx, "POST", "/agent/heartbeat", struct{}{}, nil, 0); err == nil {
			t.Fatal("call succeeded with every Hub down")
		}
		f.mu.Lock()
		f.answer["b"] = ok
		f.mu.Unlock()
		if err := c.call(ctx, "POST", "/agent/heartbeat", struct{}{}, nil, 0); err != nil {
			t.Fatal(err)
		}
		want = []string{"c /api/v1/agent/heartbeat", "a /api/v1/agent/register", "b /api/v1/agent/register", "c /api/v1/agent/register",
			"a /api/v1/agent/register", "b /api/v1/agent/register", "b /api/v1/agent/heartbeat"}
		if diff := cmp.Diff(want, f.asked); diff != "" {
			t.Errorf("asked (-want +got):\n%s", diff)
		}
		if waited := time.Since(start); waited != 500*time.Millisecond {
			t.Errorf("the second round started after %v, want the 500ms backoff", waited)
		}
	})
}

// TestRegisterRetryAfter: a Hub refusing a registration for capacity with
// Retry-After is not asked again sooner than it said (longer than the
// backoff), and a hostile Retry-After is capped.
func TestRegisterRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{
		{"", 500 * time.Millisecond}, // the backoff's first delay, zero jitter
		{"7", 7 * time.Second},
		{"86400", maxRetryAfter},
		{"soon", 500 * time.Millisecond},
	} {
		t.Run("Retry-After "+tc.header, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				refused := true
				f := &fakeHubs{answer: map[string]func(*http.Request) (*http.Response, error){
					"a": func(r *http.Request) (*http.Response, error) {
						if refused {
							resp, err := jsonAnswer(429, wire.Problem{Code: "capacity"})(r)
							if tc.header != "" {
								resp.Header.Set("Retry-After", tc.header)
							}
							return resp, err
						}
						return jsonAnswer(200, wire.RegisterResponse{SessionToken: "s", SessionExpiresAt: wire.At(time.Now().Add(time.Hour)), HeartbeatIntervalMS: 5000})(r)
					},
				}}
				c := &client{
					urls: []string{"http://a"}, bases: []string{"http://a/api/v1"},
					nodeToken: "tok", httpc: &http.Client{Transport: f}, log: discard(), now: time.Now,
					backoff: newBackoff(time.Second, 8*time.Second, func() float64 { return 0 }), timeout: time.Second, ttl: time.Hour, leaseTTL: 15 * time.Second,
					registerBody: func() wire.RegisterRequest { return wire.RegisterRequest{NodeID: "n"} }, regSem: make(chan struct{}, 1),
				}
				start := time.Now()
				if _, err := c.ensure(t.Context()); err == nil {
					t.Fatal("registered while refused")
				}
				refused = false
				if _, err := c.ensure(t.Context()); err != nil {
					t.Fatal(err)
				}
				if waited := time.Since(start); waited != tc.want {
					t.Errorf("registered again after %v, want %v", waited, tc.want)
				}
			})
		})
	}
}

// TestReporterUrgent: a finished command's report does not wait for the
// debounce of the changes before it.
func TestReporterUrgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		state, sentAt := "running", []time.Duration{}
		start := time.Now()
		build := func() wire.Report {
			mu.Lock()
			defer mu.Unlock()
			return wire.Report{Streams: []wire.ReportStream{{ID: "a", State: state}}}
		}
		send := func(context.Context, wire.Report) error {
			mu.Lock()
			defer mu.Unlock()
			sentAt = append(sentAt, time.Since(start))
			return nil
		}
		r := newReporter(build, send, 20*time.Millisecond, time.Hour, newBackoff(0, 0, nil))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { r.run(ctx); close(done) }()
		synctest.Wait()
		time.Sleep(time.Second)
		mu.Lock()
		state = "stopping"
		mu.Unlock()
		r.wake()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		state = "stopped"
		mu.Unlock()
		r.wakeNow()
		synctest.Wait()
		time.Sleep(time.Second)
		cancel()
		<-done
		if want := []time.Duration{0, 1005 * time.Millisecond}; !slices.Equal(sentAt, want) {
			t.Errorf("sent at %v, want %v", sentAt, want)
		}
	})
}

// TestPostResult: a result is retried with backoff while the Hub fails,
// and 409 (attempt finished) or 404 (unknown command) end it at once.
func TestPostResult(t *testing.T) {
	for _, c := range []struct {
		name    string
		answers []int
	}{
		{"accepted", []int{204}},
		{"attempt finished", []int{409}},
		{"unknown command", []int{404}},
		{"retried after 5xx", []int{503, 503, 204}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var asked []string
				answers := slices.Clone(c.answers)
				f := &fakeHubs{answer: map[string]func(*http.Request) (*http.Response, error){}}
				f.answer["h"] = func(r *http.Request) (*http.Response, error) {
					mu.Lock()
					defer mu.Unlock()
					asked = append(asked, r.URL.EscapedPath())
					if strings.HasSuffix(r.URL.Path, "/register") {
						return jsonAnswer(200, wire.RegisterResponse{SessionToken: "s", SessionExpiresAt: wire.At(time.Now().Add(time.Hour))})(r)
					}
					status := answers[0]
					answers = answers[1:]
					return jsonAnswer(status, wire.Problem{Code: strconv.Itoa(status)})(r)
				}
				cl := &client{
					urls: []string{"http://h"}, bases: []string{"http://h/api/v1"}, nodeToken: "tok", httpc: &http.Client{Transport: f},
					log: discard(), now: time.Now, backoff: newBackoff(time.Millisecond, time.Second, nil), timeout: time.Second, ttl: time.Hour,
					leaseTTL: time.Second, registerBody: func() wire.RegisterRequest { return wire.RegisterRequest{} }, regSem: make(chan struct{}, 1),
				}
				postResult(t.Context(), cl, newBackoff(10*time.Millisecond, time.Second, nil), discard(), "cmd/1", wire.CommandResult{AttemptID: "a", State: wire.ResultSucceeded})
				var results int
				for _, p := range asked {
					if p == "/api/v1/agent/commands/cmd%2F1/result" {
						results++
					}
				}
				if results != len(c.answers) || len(answers) != 0 {
					t.Errorf("asked %v", asked)
				}
			})
		})
	}
}

// TestNoHubImport: the Agent speaks only the wire types.
func TestNoHubImport(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue // tests run the Agent against the real Hub
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "github.com/flowplane/flowplane/internal/hub") {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
