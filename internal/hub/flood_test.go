package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// perNodeDBBound is what one node may make the Hub's database hold at
// most, WAL included (docs/node-identity.md "Admission and bounds").
const perNodeDBBound = 5 << 20

// floodClient speaks the agent protocol in bulk, without the OpenAPI check
// of testHub.do (the flood sends megabytes).
type floodClient struct {
	base   string
	client *http.Client
}

func (f floodClient) post(t *testing.T, path, token string, body any) (int, string) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(context.Background(), "POST", f.base+APIPrefix+"/agent"+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	var p wire.Problem
	_ = json.Unmarshal(out, &p)
	return res.StatusCode, p.Code
}

// floodNode is the body of one fake node of the reproduction: caps
// capabilities of 128 bytes.
func floodRegistration(node string, caps int) wire.RegisterRequest {
	r := wire.RegisterRequest{NodeID: node, BootID: "boot-" + node, Version: strings.Repeat("v", maxFieldLen), ProtocolVersion: wire.ProtocolVersion,
		NodeCredential: credentialOf(node), LeaseTTLMS: 3600000}
	for i := range caps {
		r.Capabilities = append(r.Capabilities, fmt.Sprintf("%0128d", i))
	}
	return r
}

// floodReport is a report of n streams, each with an error of errLen
// bytes (cut to maxErrorLen by the Hub).
func floodReport(seq int64, boot string, n, errLen int) wire.Report {
	r := wire.Report{BootID: boot, ReportSeq: seq, ConfigurationVersion: "v1", Metrics: map[string]float64{}}
	state := []string{"running", "failed"}[seq%2]
	for i := range n {
		r.Streams = append(r.Streams, wire.ReportStream{ID: fmt.Sprintf("stream-%04d", i), State: state, Generation: seq,
			ConfigVersion: "v1", LastError: strings.Repeat("e", errLen)})
	}
	for i := range 64 {
		r.Metrics[fmt.Sprint("m_", i)] = float64(i)
	}
	return r
}

// TestFloodReproduction is the flood: nodes registering with the
// shared node token, each with 1,024 capabilities and reports of 3,000
// streams. With the default admission everything past the per-address
// burst is refused for capacity and the rest for its size. Then, with the
// rate off (an attacker with many addresses), the nodes register within
// the bounds and report as much as the bounds allow: the Hub keeps at most
// MaxReportStreams streams per node and SVC_HUB_MAX_NODES nodes, events
// stay within the nodes' budgets, and GET /streams answers.
func TestFloodReproduction(t *testing.T) {
	nodes := 300
	if testing.Short() {
		nodes = 30
	}
	// The literal reproduction, default admission: from one address, on
	// a clock that stands still (no token comes back meanwhile).
	clock := &fakeClock{now: c0}
	th := serveOptions(t, true, Options{
		Settings: Settings{Address: "127.0.0.1:0", Storage: dbPath(t), OperatorToken: testToken, NodeToken: nodeTokenFor(testToken)},
		Logger:   slog.New(slog.DiscardHandler), Version: "test", Now: clock.Now,
	})
	f := floodClient{base: th.base, client: &http.Client{Timeout: time.Minute}}
	codes := map[string]int{}
	for i := range nodes {
		status, code := f.post(t, "/register", nodeTokenFor(testToken), floodRegistration(fmt.Sprint("flood-", i), 1024))
		codes[fmt.Sprint(status, " ", code)]++
	}
	want := map[string]int{"422 validation_failed": DefaultRegisterBurst, "429 capacity": nodes - DefaultRegisterBurst}
	if fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Fatalf("registrations answered %v, want %v", codes, want)
	}
	if _, registered := th.h.fleet.Admitted(""); registered != 0 {
		t.Fatalf("%d flood nodes registered", registered)
	}

	// Within the bounds, from many addresses (no rate), up to the
	// maximum of nodes. Under the race detector each stored report costs
	// several times as much, so a fifth of the nodes fill the Hub there
	// (the bound checked is per node; bench/hubflood runs all 300).
	if raceEnabled {
		nodes /= 5
	}
	path := dbPath(t)
	th = serveOptions(t, true, Options{
		Settings: Settings{Address: "127.0.0.1:0", Storage: path, OperatorToken: testToken, NodeToken: nodeTokenFor(testToken),
			MaxNodes: nodes, RegisterRate: -1},
		Logger: slog.New(slog.DiscardHandler), Version: "test",
	})
	f.base = th.base
	sessions := make([]string, nodes)
	var mu sync.Mutex
	codes = map[string]int{}
	note := func(status int, code string) {
		mu.Lock()
		codes[fmt.Sprint(status, " ", code)]++
		mu.Unlock()
	}
	// Four fake nodes at a time: bounded, and the Hub sees concurrency.
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range work {
				node := fmt.Sprint("flood-", i)
				reg := floodRegistration(node, maxCapabilities)
				b, _ := json.Marshal(reg)
				req, _ := http.NewRequest("POST", f.base+APIPrefix+"/agent/register", bytes.NewReader(b))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+nodeTokenFor(testToken))
				res, err := f.client.Do(req)
				if err != nil {
					t.Error(err)
					continue
				}
				var rr wire.RegisterResponse
				err = json.NewDecoder(res.Body).Decode(&rr)
				res.Body.Close()
				if res.StatusCode != 200 || err != nil {
					t.Errorf("register %s: %d %v", node, res.StatusCode, err)
					continue
				}
				sessions[i] = rr.SessionToken
				// The reproduction's report, then the most the bounds
				// take (the bench sends the longest strings; a test
				// keeps its writes small).
				note(f.post(t, "/report", rr.SessionToken, floodReport(1, reg.BootID, 3000, 16)))
				note(f.post(t, "/report", rr.SessionToken, floodReport(2, reg.BootID, store.MaxReportStreams, 16)))
			}
		})
	}
	for i := range nodes {
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	want = map[string]int{"422 validation_failed": nodes, "204 ": nodes}
	if fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Fatalf("reports answered %v, want %v", codes, want)
	}
	status, code := f.post(t, "/register", nodeTokenFor(testToken), floodRegistration("one-more", 1))
	if status != http.StatusServiceUnavailable || code != CodeCapacity {
		t.Fatalf("node %d: %d %s", nodes+1, status, code)
	}

	// What the Hub keeps: every node's streams, at most MaxReportStreams
	// each, as rows replaced per node.
	ctx := context.Background()
	rows := 0
	for i := range nodes {
		obs, err := th.h.st.ObservedStreams(ctx, fmt.Sprint("flood-", i))
		if err != nil {
			t.Fatal(err)
		}
		rows += len(obs)
	}
	if rows != nodes*store.MaxReportStreams {
		t.Fatalf("%d observed rows, want %d", rows, nodes*store.MaxReportStreams)
	}
	events, after := 0, int64(0)
	for range nodes * nodeEventBurst {
		evs, err := th.h.st.EventsAfter(ctx, after, store.EventFilter{}, store.MaxEvents)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		events, after = events+len(evs), evs[len(evs)-1].ID
	}
	// node_registered, node_online and the budget's stream events.
	if events > nodes*(nodeEventBurst+2) {
		t.Fatalf("%d events from %d nodes", events, nodes)
	}
	// GET /streams answers, with every stream counted.
	began := time.Now()
	r := th.do(t, "GET", APIPrefix+"/streams?page_size=100", "", "Authorization", "Bearer "+testToken)
	t.Logf("GET /streams over %d streams took %v (not asserted: bench/hubflood measures it)", nodes*store.MaxReportStreams, time.Since(began))
	if r.status != 200 {
		t.Fatalf("GET /streams: %d %.300s", r.status, r.body)
	}
	if pg := decode[wire.Page[wire.Stream]](t, r); pg.Total != nodes*store.MaxReportStreams || len(pg.Items) != 100 {
		t.Fatalf("GET /streams: total %d, %d items", pg.Total, len(pg.Items))
	}
	// The database holds no more than the bounds allow per node.
	var size int64
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(path + suffix); err == nil {
			size += fi.Size()
		}
	}
	if bound := int64(nodes) * perNodeDBBound; size > bound {
		t.Fatalf("database %d bytes for %d nodes, over the bound %d", size, nodes, bound)
	}
	t.Logf("%d nodes: %d observed rows, %d events, database and WAL %d MiB", nodes, rows, events, size>>20)
}

// TestStreamsPaging: the pages of GET /streams, at every page size, list
// desired and reported streams merged by node and id, each once, with the
// same total as the filtered form.
func TestStreamsPaging(t *testing.T) {
	c := newAdmissionHub(t, Settings{RegisterRate: -1})
	sessions := map[string]string{"n1": c.register(t, "n1"), "n2": c.register(t, "n2")}
	for _, d := range []string{"n1/s2", "n0/s1", "n3/a", "n2/s5"} {
		node, id, _ := strings.Cut(d, "/")
		if rec := c.do(t, "PUT", APIPrefix+"/nodes/"+node+"/streams/"+id+"/desired-state", `{"state":"running"}`, ""); rec.Code != 202 {
			t.Fatalf("PUT %s: %d %s", d, rec.Code, rec.Body)
		}
	}
	for node, ids := range map[string][]string{"n1": {"s3", "s1", "s2"}, "n2": {"s4"}} {
		rep := wire.Report{BootID: "b", ReportSeq: 1}
		for _, id := range ids {
			rep.Streams = append(rep.Streams, wire.ReportStream{ID: id, State: "running"})
		}
		b, _ := jsonMarshal(rep)
		if rec := c.do(t, "POST", APIPrefix+"/agent/report", b, sessions[node]); rec.Code != 204 {
			t.Fatalf("report: %d %s", rec.Code, rec.Body)
		}
	}
	want := []string{"n0/s1", "n1/s1", "n1/s2", "n1/s3", "n2/s4", "n2/s5", "n3/a"}
	list := func(query string) (got []string, total int) {
		t.Helper()
		for page := 1; page <= len(want)+1; page++ {
			pg := recDecode[wire.Page[wire.Stream]](t, c.do(t, "GET", APIPrefix+"/streams?page="+fmt.Sprint(page)+"&"+query, "", ""))
			for _, s := range pg.Items {
				got = append(got, s.NodeID+"/"+s.ID)
			}
			total = pg.Total
		}
		return got, total
	}
	for size := 1; size <= len(want)+1; size++ {
		got, total := list("page_size=" + fmt.Sprint(size))
		if fmt.Sprint(got) != fmt.Sprint(want) || total != len(want) {
			t.Fatalf("page_size %d: %v (total %d), want %v", size, got, total, want)
		}
	}
	if got, total := list("page_size=2&state=none"); fmt.Sprint(got) != "[n0/s1 n2/s5 n3/a]" || total != 3 {
		t.Fatalf("state=none: %v (total %d)", got, total)
	}
	if got, total := list("page_size=2&node_id=n1"); fmt.Sprint(got) != "[n1/s1 n1/s2 n1/s3]" || total != 3 {
		t.Fatalf("node_id=n1: %v (total %d)", got, total)
	}
}
