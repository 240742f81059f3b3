package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// Tokens of the Hub child processes.
const (
	hubOperatorToken = "op-token-for-hub-tests"
	hubNodeToken     = "node-token-for-hub-tests"
)

// hubProc is `flowplane hub` running as a real child process: the test
// binary re-executed through TestMain's childEnv, listening on a port the
// OS chose (read from its "hub: listening" log line).
type hubProc struct {
	cmd     *exec.Cmd
	base    string // http://127.0.0.1:<port>
	storage string // its SQLite file
	logs    *logWatch

	waitOnce sync.Once
	waitErr  error
}

// listeningRE finds the bound address in the Hub's slog text line
// `msg="hub: listening" address=127.0.0.1:40447`.
var listeningRE = regexp.MustCompile(`msg="hub: listening" address=(\S+)`)

// logWatch keeps a child's output and reports the first listening address.
type logWatch struct {
	mu    sync.Mutex // guards buf and sent
	buf   bytes.Buffer
	sent  bool
	addrc chan string // buffered(1)
}

func (l *logWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if !l.sent {
		if m := listeningRE.FindSubmatch(l.buf.Bytes()); m != nil {
			l.sent = true
			l.addrc <- string(m[1])
		}
	}
	return len(p), nil
}

// excerpt is the output's first head and last tail lines.
func (l *logWatch) excerpt(head, tail int) string {
	lines := strings.SplitAfter(l.String(), "\n")
	if len(lines) <= head+tail {
		return strings.Join(lines, "")
	}
	return strings.Join(lines[:head], "") + fmt.Sprintf("[... %d lines ...]\n", len(lines)-head-tail) +
		strings.Join(lines[len(lines)-tail:], "")
}

func (l *logWatch) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startHub starts a Hub child over the SQLite file storage and waits until
// it listens and /readiness answers 200. The child is killed at cleanup.
func startHub(t *testing.T, storage string) *hubProc {
	t.Helper()
	cmd := childCommand("hub")
	cmd.Env = append(cmd.Env,
		"SVC_HUB_ADDRESS=127.0.0.1:0", "SVC_HUB_STORAGE="+storage,
		"SVC_OPERATOR_TOKEN="+hubOperatorToken, "SVC_NODE_TOKEN="+hubNodeToken,
		"SVC_HUB_INSECURE_LOCAL=")
	lw := &logWatch{addrc: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = lw, lw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &hubProc{cmd: cmd, logs: lw, storage: storage}
	exited := make(chan struct{})
	go func() { _ = p.wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = p.wait()
		if t.Failed() {
			t.Logf("hub child output:\n%s", lw.excerpt(20, 30))
		}
	})
	select {
	case addr := <-lw.addrc:
		p.base = "http://" + addr
	case <-exited:
		t.Fatalf("hub child exited before listening: %v\n%s", p.waitErr, lw.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("hub child did not listen within 20 s\n%s", lw.String())
	}
	if !waitReadiness(p.base, http.StatusOK, 20*time.Second) {
		t.Fatalf("hub child never answered /readiness 200\n%s", lw.String())
	}
	return p
}

// wait reaps the child once; later calls return the same result.
func (p *hubProc) wait() error {
	p.waitOnce.Do(func() { p.waitErr = p.cmd.Wait() })
	return p.waitErr
}

// kill sends SIGKILL and reaps the child. It may be called from any
// goroutine.
func (p *hubProc) kill() error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL hub: %w", err)
	}
	_ = p.wait()
	return nil
}

// stop sends SIGTERM and requires a clean exit within 15 s.
func (p *hubProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM hub: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("hub did not stop cleanly: %v", err)
		}
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Errorf("hub did not stop within 15 s of SIGTERM")
	}
}

// waitReadiness polls GET /readiness until it answers want or d elapses.
func waitReadiness(base string, want int, d time.Duration) bool {
	c := &http.Client{Timeout: 2 * time.Second}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if resp, err := c.Get(base + "/readiness"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// newHubClient is a client with enough idle connections for the workers.
func newHubClient(t *testing.T, workers int) *http.Client {
	tr := &http.Transport{MaxIdleConns: 2 * workers, MaxIdleConnsPerHost: 2 * workers, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: 10 * time.Second, Transport: tr}
}

// hubResp is one answer of the Hub.
type hubResp struct {
	status int
	header http.Header
	body   []byte
}

func hubDo(ctx context.Context, c *http.Client, method, u, body string, header ...string) (hubResp, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return hubResp{}, err
	}
	req.Header.Set("Authorization", "Bearer "+hubOperatorToken)
	if body != "" || method != http.MethodGet {
		// Every mutation needs a JSON Content-Type, bodiless ones too.
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return hubResp{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return hubResp{}, err
	}
	return hubResp{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// resKey names one stream resource.
type resKey struct{ node, stream string }

func (k resKey) String() string { return k.node + "/" + k.stream }

func (k resKey) desiredURL(base string) string {
	return base + "/api/v1/nodes/" + url.PathEscape(k.node) + "/streams/" + url.PathEscape(k.stream) + "/desired-state"
}

// ack is a desired-state write the Hub answered 202.
type ack struct {
	res  resKey
	gen  int64
	op   string
	key  string // Idempotency-Key, "" when none was sent
	body string
}

// parseAccepted checks a 202's body and headers against each other and
// returns the acknowledged write.
func parseAccepted(r hubResp, res resKey, key, body string) (ack, error) {
	var d wire.DesiredStateResponse
	if err := json.Unmarshal(r.body, &d); err != nil {
		return ack{}, fmt.Errorf("202 body: %w: %s", err, r.body)
	}
	a := ack{res: res, gen: d.Generation, op: d.OperationID, key: key, body: body}
	switch {
	case d.OperationID == "" || d.IntentID != d.OperationID:
		return a, fmt.Errorf("202 ids: operation %q intent %q", d.OperationID, d.IntentID)
	case d.NodeID != res.node || d.StreamID != res.stream:
		return a, fmt.Errorf("202 for %s/%s, sent to %s", d.NodeID, d.StreamID, res)
	case d.Generation < 1:
		return a, fmt.Errorf("202 generation %d", d.Generation)
	case r.header.Get("ETag") != fmt.Sprintf(`"generation-%d"`, d.Generation):
		return a, fmt.Errorf("202 ETag %q, body generation %d", r.header.Get("ETag"), d.Generation)
	case r.header.Get("Location") != "/api/v1/operations/"+d.OperationID:
		return a, fmt.Errorf("202 Location %q, operation %s", r.header.Get("Location"), d.OperationID)
	}
	return a, nil
}

// getJSON GETs u and decodes a 200 answer into v.
func hubGetJSON(ctx context.Context, c *http.Client, u string, v any) (int, error) {
	r, err := hubDo(ctx, c, http.MethodGet, u, "")
	if err != nil {
		return 0, err
	}
	if r.status != http.StatusOK {
		return r.status, nil
	}
	return r.status, json.Unmarshal(r.body, v)
}

// getAll reads every page of the collection at u (which has a query).
func getAll[T any](ctx context.Context, c *http.Client, u string) ([]T, error) {
	var out []T
	for page := 1; page <= 1000; page++ {
		var pg wire.Page[T]
		st, err := hubGetJSON(ctx, c, fmt.Sprintf("%s&page=%d&page_size=100", u, page), &pg)
		if err != nil {
			return nil, err
		}
		if st != http.StatusOK {
			return nil, fmt.Errorf("GET %s: status %d", u, st)
		}
		out = append(out, pg.Items...)
		if len(pg.Items) == 0 || len(out) >= pg.Total {
			return out, nil
		}
	}
	return nil, fmt.Errorf("GET %s: more than 1000 pages", u)
}

// auditRow is the part of an audit record the checks read.
type auditRow struct {
	Action  string `json:"action"`
	Outcome string `json:"outcome"`
}

// verifyDurable checks, through the API of a restarted Hub, that every
// acknowledged write is there and that nothing is half-written:
//   - per resource, desired.generation (and the ETag) >= the highest
//     generation a 202 acknowledged;
//   - the resource's intents carry exactly the generations 1..generation;
//   - each intent has one intent_accepted event with its generation and one
//     accepted audit record;
//   - GET /operations/{id} of every 202 answers that generation.
//
// resources lists every resource written to, acknowledged or not. The
// events are read from the Hub's storage (read-only, beside the running
// Hub): the API serves only the newest 2,048, and the retention sweep (every
// 60 s) has not run yet. It returns the generation of each resource.
func verifyDurable(ctx context.Context, t *testing.T, c *http.Client, hub *hubProc, resources []resKey, acks []ack) map[resKey]int64 {
	t.Helper()
	base := hub.base
	maxAcked := map[resKey]int64{}
	for _, a := range acks {
		maxAcked[a.res] = max(maxAcked[a.res], a.gen)
	}
	events := storedEvents(t, hub.storage, "intent_accepted")
	evByRes := map[resKey][]wire.Event{}
	for _, e := range events {
		k := resKey{e.NodeID, e.ResourceID}
		evByRes[k] = append(evByRes[k], e)
	}
	var (
		mu      sync.Mutex // guards gens and intents
		gens    = map[resKey]int64{}
		intents int
	)
	parallel(len(resources), func(i int) {
		res := resources[i]
		gen, n, err := verifyResource(ctx, c, base, res, maxAcked[res], evByRes[res])
		if err != nil {
			t.Errorf("%s: %v", res, err)
		}
		mu.Lock()
		gens[res], intents = gen, intents+n
		mu.Unlock()
	})
	parallel(len(acks), func(i int) {
		a := acks[i]
		var op wire.Operation
		st, err := hubGetJSON(ctx, c, base+"/api/v1/operations/"+url.PathEscape(a.op), &op)
		switch {
		case err != nil:
			t.Errorf("GET operation %s: %v", a.op, err)
		case st != http.StatusOK:
			t.Errorf("acknowledged operation %s (%s generation %d): GET answered %d", a.op, a.res, a.gen, st)
		case op.Generation != a.gen || op.NodeID != a.res.node || op.ResourceID != a.res.stream:
			t.Errorf("acknowledged operation %s was %s generation %d, now %s/%s generation %d",
				a.op, a.res, a.gen, op.NodeID, op.ResourceID, op.Generation)
		}
	})
	t.Logf("verified %d acknowledged writes and %d stored intents over %d resources", len(acks), intents, len(resources))
	return gens
}

// verifyResource checks one resource for verifyDurable and returns its
// generation and how many intents it has. events are the resource's
// intent_accepted events.
func verifyResource(ctx context.Context, c *http.Client, base string, res resKey, acked int64, events []wire.Event) (int64, int, error) {
	gen, err := generation(ctx, c, base, res)
	if err != nil {
		return 0, 0, err
	}
	var errs []error
	if gen < acked {
		errs = append(errs, fmt.Errorf("generation %d after restart, but generation %d was acknowledged with 202", gen, acked))
	}
	esc := url.QueryEscape
	filter := "node_id=" + esc(res.node) + "&resource_id=" + esc(res.stream)
	ops, err := getAll[wire.Operation](ctx, c, base+"/api/v1/operations?"+filter)
	if err != nil {
		return gen, 0, err
	}
	seen := map[int64]string{}
	for _, op := range ops {
		if other, dup := seen[op.Generation]; dup {
			errs = append(errs, fmt.Errorf("generation %d held by intents %s and %s", op.Generation, other, op.OperationID))
		}
		seen[op.Generation] = op.OperationID
		if op.Generation < 1 || op.Generation > gen {
			errs = append(errs, fmt.Errorf("intent %s has generation %d outside 1..%d", op.OperationID, op.Generation, gen))
		}
	}
	if int64(len(seen)) != gen {
		errs = append(errs, fmt.Errorf("generation %d but %d intents (a half-written write?)", gen, len(seen)))
	}
	evGen := map[string]int64{}
	for _, e := range events {
		g, _ := e.Data["generation"].(float64)
		if _, dup := evGen[e.OperationID]; dup {
			errs = append(errs, fmt.Errorf("two intent_accepted events for %s", e.OperationID))
		}
		evGen[e.OperationID] = int64(g)
	}
	for _, op := range ops {
		if g, ok := evGen[op.OperationID]; !ok {
			errs = append(errs, fmt.Errorf("intent %s (generation %d) has no intent_accepted event", op.OperationID, op.Generation))
		} else if g != op.Generation {
			errs = append(errs, fmt.Errorf("intent %s generation %d, its event says %d", op.OperationID, op.Generation, g))
		}
	}
	if len(evGen) != len(ops) {
		errs = append(errs, fmt.Errorf("%d intent_accepted events for %d intents", len(evGen), len(ops)))
	}
	audit, err := getAll[auditRow](ctx, c, base+"/api/v1/audit?action=stream_desired_state&"+filter)
	if err != nil {
		return gen, len(ops), err
	}
	accepted := 0
	for _, a := range audit {
		if a.Outcome == "accepted" {
			accepted++
		}
	}
	if accepted != len(ops) {
		errs = append(errs, fmt.Errorf("%d accepted audit records for %d intents", accepted, len(ops)))
	}
	return gen, len(ops), errors.Join(errs...)
}

// generation reads a resource's desired generation (0 when it has none)
// and checks its ETag.
func generation(ctx context.Context, c *http.Client, base string, res resKey) (int64, error) {
	r, err := hubDo(ctx, c, http.MethodGet, base+"/api/v1/nodes/"+url.PathEscape(res.node)+"/streams/"+url.PathEscape(res.stream), "")
	switch {
	case err != nil:
		return 0, err
	case r.status == http.StatusNotFound:
		return 0, nil
	case r.status != http.StatusOK:
		return 0, fmt.Errorf("GET: status %d: %s", r.status, r.body)
	}
	var s wire.Stream
	if err := json.Unmarshal(r.body, &s); err != nil {
		return 0, err
	}
	if etag := r.header.Get("ETag"); etag != fmt.Sprintf(`"generation-%d"`, s.Desired.Generation) {
		return 0, fmt.Errorf("ETag %q, desired.generation %d", etag, s.Desired.Generation)
	}
	return s.Desired.Generation, nil
}

// generations reads the generation of every resource.
func generations(ctx context.Context, t *testing.T, c *http.Client, base string, resources []resKey) map[resKey]int64 {
	t.Helper()
	var mu sync.Mutex // guards out
	out := map[resKey]int64{}
	parallel(len(resources), func(i int) {
		g, err := generation(ctx, c, base, resources[i])
		if err != nil {
			t.Errorf("%s: %v", resources[i], err)
		}
		mu.Lock()
		out[resources[i]] = g
		mu.Unlock()
	})
	return out
}

// parallel runs fn(0..n-1) on 8 goroutines.
func parallel(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// storedEvents reads the events of one kind from a Hub's storage: its
// SQLite file, read-only, or its PostgreSQL database.
func storedEvents(t *testing.T, path, kind string) []wire.Event {
	t.Helper()
	driver, dsn, q := "sqlite", "file:"+path+"?mode=ro", "SELECT id, node_id, resource_id, operation_id, data FROM events WHERE kind = ? ORDER BY id"
	if strings.HasPrefix(path, "postgres://") {
		driver, dsn, q = "pgx", path, strings.Replace(q, "?", "$1", 1)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(q, kind)
	if err != nil {
		t.Fatalf("read events: %v", err)
	}
	defer rows.Close()
	var out []wire.Event
	for rows.Next() {
		e := wire.Event{Kind: kind}
		var data string
		if err := rows.Scan(&e.ID, &e.NodeID, &e.ResourceID, &e.OperationID, &data); err != nil {
			t.Fatal(err)
		}
		if data != "" {
			if err := json.Unmarshal([]byte(data), &e.Data); err != nil {
				t.Fatalf("event %d data: %v", e.ID, err)
			}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// quickCheck opens the SQLite file of a stopped Hub and requires
// PRAGMA quick_check to answer ok.
func quickCheck(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("PRAGMA quick_check")
	if err != nil {
		t.Fatalf("quick_check: %v", err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || lines[0] != "ok" {
		t.Errorf("quick_check: %v", lines)
	}
}

// sortedKeys returns the resources of m in a stable order.
func sortedKeys(m map[resKey]bool) []resKey {
	out := make([]resKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
