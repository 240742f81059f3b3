package all_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gws "github.com/gorilla/websocket"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
	natsserver "github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestArkFlowExamplesRun runs each example of testdata/arkflow whose
// brokers, databases and servers can run here, and proves what it
// delivers, with exact counts and, where the SQL makes it deterministic,
// exact content.
//
// Each example runs in the real binary (`go build ./cmd/flowplane` once
// per test process) as a child process: `flowplane --config <file>
// --state-dir <tmp>`, in a temporary working directory (where relative
// paths such as durability.path land). A child process rather than
// componenttest.Engine, because the stdout output writes to the process's
// standard output and the node logs there too: the child's stdout is
// split into JSON lines (the stdout output's payloads) and log lines (the
// plain log format), and its exit code says whether a finite example
// completed. Finite examples (generate with count, the sql input) exit by
// themselves; the others are stopped with SIGTERM (then SIGKILL after 10 s)
// once the test has seen what it waited for.
//
// The examples are run unchanged but for their addresses, which become
// those of servers started by the test on 127.0.0.1 with ports from the OS:
//
//	example                          | text in the example              | becomes
//	---------------------------------|----------------------------------|-----------------------------------------
//	control_plane_example/hub/smoke  | 127.0.0.1:18080 / 18081 / 18083  | a free loopback port (the node's API)
//	cdc_debezium, eos-kafka,         | 127.0.0.1:9092                   | a kfake broker
//	kafka_example, schema_registry   |                                  |
//	schema_registry                  | http://127.0.0.1:18086           | an httptest schema registry
//	http_client_example              | 127.0.0.1:18084                  | an httptest server recording requests
//	http_server_example              | 127.0.0.1:18085                  | a free loopback port (the http input)
//	mqtt_example                     | port: 1883                       | port: <a mochi-mqtt broker's port>
//	nats_input/output_example        | nats://127.0.0.1:4222            | an embedded nats-server with JetStream
//	redis_input/output/temporary     | 127.0.0.1:6379                   | a redis-server child process
//	websocket_input_example          | 127.0.0.1:18087                  | a gorilla/websocket server
//	durability_example_* (s3),       | http://127.0.0.1:19000           | gofakes3 (in memory) on loopback
//	durability_smoke_test,           |                                  |
//	sql_input_example                |                                  |
//	durability_example_aggressive,   | ${FP_NODE_ID} ${FP_S3_KEY}       | environment variables of the child
//	_compressed, _parallel, _s3      | ${FP_S3_SECRET}                  |
//
// An example without health_check serves the node's API on the default
// 127.0.0.1:8080; the test appends `health_check: {address: <a free
// loopback port>}` to it, that default made explicit and substituted, so
// that examples run side by side and never meet another server on 8080.
//
// protobuf_example reads testdata/protos/ relative to its working
// directory; the test writes readings.proto (message readings.Reading)
// there.
//
// Examples not run here (no subtest), and why:
//
//	example                  | reason
//	-------------------------|-----------------------------------------------------------------
//	sql_output_example       | needs a MySQL server, which cannot run here
//	mongodb_output_example   | needs a MongoDB server, which cannot run here
//	vrl_example              | rejected by design: VRL is a Rust library (see arkflowMissing)
//	python_processor_example | rejected by design: Python processors (see arkflowMissing)
//	control_plane_node       | rejected by design: health_check.hub_url was removed
func TestArkFlowExamplesRun(t *testing.T) {
	flowplaneBinary(t)
	files, err := filepath.Glob(filepath.Join(repoDir(), "testdata", "arkflow", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 32 {
		t.Fatalf("%d ArkFlow examples, want 32", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		_, runs := runnable[name]
		if runs == slices.Contains(notRunHere, name) {
			t.Errorf("%s must be in exactly one of runnable and notRunHere", name)
		}
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		run, ok := runnable[name]
		if !ok {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t)
		})
	}
}

// notRunHere are the examples with no subtest (see the table above).
var notRunHere = []string{
	"sql_output_example", "mongodb_output_example", "vrl_example", "python_processor_example", "control_plane_node",
}

// runnable maps each example with a subtest to its run.
var runnable = map[string]func(t *testing.T){
	"drop_output_example":           runDropOutput,
	"generate_example":              runGenerateExample,
	"http_client_example":           runHTTPClient,
	"http_server_example":           runHTTPServer,
	"kafka_example":                 runKafkaExample,
	"mqtt_example":                  runMQTT,
	"nats_input_example":            runNATSInput,
	"nats_output_example":           runNATSOutput,
	"redis_input_example":           runRedisInput,
	"redis_output_example":          runRedisOutput,
	"redis_temporary_example":       runRedisTemporary,
	"websocket_input_example":       runWebSocketInput,
	"control_plane_example":         runControlPlaneExample,
	"control_plane_hub":             runControlPlaneHub,
	"control_plane_smoke":           runControlPlaneSmoke,
	"cdc_debezium":                  runCDCDebezium,
	"durability_example":            runDurabilityLocal,
	"durability_example_aggressive": runDurabilityS3("durability_example_aggressive", 20000, `{"reading":5,"device":"fan_1"}`),
	"durability_example_compressed": runDurabilityS3("durability_example_compressed", 20000, `{"reading":6,"device":"meter_4"}`),
	"durability_example_parallel":   runDurabilityS3("durability_example_parallel", 50000, `{"reading":7,"device":"line_3"}`),
	"durability_example_s3":         runDurabilityS3("durability_example_s3", 500, `{"reading":8,"device":"tank_2"}`),
	"durability_smoke_test":         runDurabilitySmoke,
	"eos-kafka":                     runEOSKafka,
	"join_buffer_example":           runJoinBuffer,
	"protobuf_example":              runProtobuf,
	"schema_registry":               runSchemaRegistry,
	"sql_input_example":             runSQLInput,
}

// sameLines requires want lines, each equal as JSON to line.
func sameLines(t *testing.T, got []string, want int, line string) {
	t.Helper()
	if len(got) != want {
		t.Fatalf("%d payload lines, want %d", len(got), want)
	}
	w := obj(t, line)
	for i, g := range decode(t, got) {
		if diff := cmp.Diff(w, g); diff != "" {
			t.Fatalf("line %d (-want +got):\n%s", i, diff)
		}
	}
}

// everyLine requires every line to equal line as JSON, and at least one.
func everyLine(t *testing.T, got []string, line string) {
	t.Helper()
	if len(got) == 0 {
		t.Fatal("no payload lines")
	}
	sameLines(t, got, len(got), line)
}

var listening = regexp.MustCompile(`msg=listening listener=control-plane address=(\S+)`)

// control_plane_example: the API on the substituted address; exactly the
// five generated messages; the node exits 0 by itself.
func runControlPlaneExample(t *testing.T) {
	addr := freeAddr(t)
	n := startNode(t, "control_plane_example", []sub{{"127.0.0.1:18080", addr}})
	if got := n.waitLog(listening)[1]; got != addr {
		t.Errorf("API listening on %s, want %s", got, addr)
	}
	code, lines := n.waitExit()
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	sameLines(t, lines, 5, `{"tick": 7}`)
	if c := n.endCounts(); c != [4]int{5, 5, 0, 0} {
		t.Errorf("stream ended with received, sent, dropped, errors = %v, want [5 5 0 0]", c)
	}
}

// getJSON GETs url until it answers (the listener may not be up yet),
// then requires status 200 and returns the body as JSON.
func getJSON(t *testing.T, url string) any {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
			}
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				t.Fatalf("GET %s: %v: %s", url, err, body)
			}
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a listener that is not up yet
	}
}

// control_plane_hub: a node with no streams serves /health on the
// substituted address until SIGTERM, then exits 0.
func runControlPlaneHub(t *testing.T) {
	addr := freeAddr(t)
	n := startNode(t, "control_plane_hub", []sub{{"127.0.0.1:18081", addr}})
	health := getJSON(t, "http://"+addr+"/health").(map[string]any)
	if health["status"] != "healthy" {
		t.Errorf("/health = %v, want status healthy", health)
	}
	if lines := n.stopClean(); len(lines) != 0 {
		t.Errorf("payload lines from a node with no streams: %q", lines)
	}
}

// control_plane_smoke: the unbounded generate stream runs (the API lists
// smoke-check running) and every line it writes is the context.
func runControlPlaneSmoke(t *testing.T) {
	addr := freeAddr(t)
	n := startNode(t, "control_plane_smoke", []sub{{"127.0.0.1:18083", addr}})
	n.waitLines(2)
	st := getJSON(t, "http://"+addr+"/streams/smoke-check").(map[string]any)
	observed, _ := st["observed"].(map[string]any)
	if st["id"] != "smoke-check" || observed["state"] != "running" {
		t.Errorf("GET /streams/smoke-check = %v, want id smoke-check, observed state running", st)
	}
	lines := n.stopClean()
	everyLine(t, lines, `{"ok": true}`)
	if c := n.endCounts(); c != [4]int{len(lines), len(lines), 0, 0} {
		t.Errorf("stream ended with received, sent, dropped, errors = %v, want %d sent (the lines written), no errors", c, len(lines))
	}
}

// generate_example: 20 messages of one row each, aggregated per batch;
// the last SQL keeps __value__ (arrow_to_json's payload) among its
// columns, and a table with __value__ is written as that payload.
func runGenerateExample(t *testing.T) {
	n := startNode(t, "generate_example", nil)
	code, lines := n.waitExit()
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	sameLines(t, lines, 20, `{"device":"boiler_1","low":21,"high":21}`)
}

// drop_output_example: the aggregation runs and its results are dropped
// without errors (the drop output shows nothing else).
func runDropOutput(t *testing.T) {
	n := startNode(t, "drop_output_example", nil)
	id := n.waitLog(regexp.MustCompile(`msg="stream state" stream=(\S+) state=running`))[1]
	waitUntil(t, "the stream to send a batch", func() bool {
		st := getJSON(t, "http://"+n.api+"/streams/"+id).(map[string]any)
		observed, _ := st["observed"].(map[string]any)
		counters, _ := observed["counters"].(map[string]any)
		sent, _ := counters["sent"].(float64)
		return sent > 0
	})
	if lines := n.stopClean(); len(lines) != 0 {
		t.Errorf("payload lines from a drop output: %d", len(lines))
	}
	c := n.endCounts()
	if c[0] == 0 || c[0]%5000 != 0 || c[1] == 0 || c[3] != 0 {
		t.Errorf("stream ended with received, sent, dropped, errors = %v, want whole batches of 5000 received, some sent, no errors", c)
	}
}

// durability_example: 500 messages through the local WAL (./data/fp-wal
// under the working directory) and the Arrow round trip, each once.
func runDurabilityLocal(t *testing.T) {
	n := startNode(t, "durability_example", nil)
	code, lines := n.waitExit()
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	sameLines(t, lines, 500, `{"reading":4,"device":"valve_9"}`)
	if _, err := os.Stat(filepath.Join(n.dir, "data", "fp-wal")); err != nil {
		t.Errorf("the WAL directory: %v", err)
	}
}

// runDurabilityS3 runs an object-store WAL example: every generated
// message once on stdout, and WAL objects under fp/wal/ in the bucket.
func runDurabilityS3(name string, count int, line string) func(t *testing.T) {
	return func(t *testing.T) {
		s3 := startS3(t, "fp-wal")
		n := startNode(t, name, []sub{{"http://127.0.0.1:19000", s3.url}},
			"FP_NODE_ID=node-a", "FP_S3_KEY=local-key", "FP_S3_SECRET=local-secret")
		code, lines := n.waitExit()
		if code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		sameLines(t, lines, count, line)
		if keys := s3.keys(t, "fp-wal", "fp/wal/"); len(keys) == 0 {
			t.Error("no WAL objects under fp/wal/ in the bucket")
		}
	}
}

// durability_smoke_test: 50 messages through the object-store WAL into
// the drop output; the stream ends having sent each once.
func runDurabilitySmoke(t *testing.T) {
	s3 := startS3(t, "fp-smoke")
	n := startNode(t, "durability_smoke_test", []sub{{"http://127.0.0.1:19000", s3.url}})
	code, _ := n.waitExit()
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if c := n.endCounts(); c != [4]int{50, 50, 0, 0} {
		t.Errorf("stream ended with received, sent, dropped, errors = %v, want [50 50 0 0]", c)
	}
	if keys := s3.keys(t, "fp-smoke", "fp/smoke/"); len(keys) == 0 {
		t.Error("no WAL objects under fp/smoke/ in the bucket")
	}
}

// http_client_example: each buffered summary is POSTed to /ingest; the
// generator's readings are all 2, so total is twice n.
func runHTTPClient(t *testing.T) {
	rec := startRecorder(t)
	n := startNode(t, "http_client_example", []sub{{"127.0.0.1:18084", strings.TrimPrefix(rec.srv.URL, "http://")}})
	for range 3 {
		req := rec.next(t)
		if req.method != http.MethodPost || req.path != "/ingest" {
			t.Fatalf("%s %s, want POST /ingest", req.method, req.path)
		}
		var row struct{ N, Total float64 }
		if err := json.Unmarshal(req.body, &row); err != nil {
			t.Fatalf("body %s: %v", req.body, err)
		}
		if row.N <= 0 || int(row.N)%500 != 0 || row.Total != 2*row.N {
			t.Fatalf("body %s: want n a multiple of 500 (whole generated batches) and total = 2n", req.body)
		}
	}
	n.stopClean()
}

// http_server_example: N authorized POSTs give N summaries (one request,
// one batch); requests without the token are refused and deliver nothing.
func runHTTPServer(t *testing.T) {
	addr := freeAddr(t)
	n := startNode(t, "http_server_example", []sub{{"127.0.0.1:18085", addr}})
	url := "http://" + addr + "/events"
	post := func(token, body string) int {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// Wait for the listener with requests it must refuse.
	deadline := time.Now().Add(waitBound)
	for code := post("", `{"reading": 1000}`); code != http.StatusUnauthorized; code = post("", `{"reading": 1000}`) {
		if code != 0 || time.Now().After(deadline) {
			t.Fatalf("POST without a token: status %d, want 401", code)
		}
		time.Sleep(20 * time.Millisecond) // polling a listener that is not up yet
	}
	if code := post("wrong-token", `{"reading": 1000}`); code != http.StatusUnauthorized {
		t.Fatalf("POST with a wrong token: status %d, want 401", code)
	}
	const N = 10
	var want []map[string]any
	for i := 1; i <= N; i++ {
		if code := post("local-test-token", fmt.Sprintf(`{"reading": %d}`, i)); code/100 != 2 {
			t.Fatalf("POST %d: status %d", i, code)
		}
		want = append(want, map[string]any{"n": 1.0, "mean": float64(i)})
	}
	n.waitLines(N)
	got := decode(t, n.stopClean())
	byMean := func(a, b map[string]any) int { return int(a["mean"].(float64) - b["mean"].(float64)) }
	slices.SortFunc(got, byMean)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summaries (-want +got):\n%s", diff)
	}
}

// join_buffer_example: five orders and five shipments of order 42 fall in
// one session window and join into 5 x 5 rows; the node exits by itself.
func runJoinBuffer(t *testing.T) {
	n := startNode(t, "join_buffer_example", nil)
	code, lines := n.waitExit()
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if len(lines) != 25 {
		t.Fatalf("%d joined rows, want 25", len(lines))
	}
	for _, row := range decode(t, lines) {
		if row["amount"] != 99.0 || row["carrier"] != "rail" {
			t.Fatalf("joined row %v, want amount 99 and carrier rail", row)
		}
	}
}

// kafka_example: N clicks published after the input is positioned at the
// latest offset arrive projected on clicks-projected, each once.
func runKafkaExample(t *testing.T) {
	addr := kafkaCluster(t, "clicks", "clicks-projected")
	n := startNode(t, "kafka_example", []sub{{"127.0.0.1:9092", addr}})
	cl := kafkaClient(t, addr)
	out := newTopicReader(t, addr, "clicks-projected", false)
	untilSeen(t, func() { produce(t, cl, "clicks", []byte(`{"page":"marker","user_id":0,"ref":"x"}`)) }, out.seen("marker"))
	const N = 50
	want := map[string]int{}
	var values [][]byte
	for i := 1; i <= N; i++ {
		values = append(values, fmt.Appendf(nil, `{"page":"/p/%d","user_id":%d,"ref":"search"}`, i, i))
		want[fmt.Sprintf(`{"page":"/p/%d","user_id":%d}`, i, i)] = 1
	}
	produce(t, cl, "clicks", values...)
	got := out.waitDistinct(t, "marker", N)
	n.stopClean()
	checkOnce(t, got, want, true)
}

// topicReader reads a topic from its start in the background, keeping
// each value normalized as compact JSON.
type topicReader struct {
	mu     sync.Mutex // guards values
	values []string
	wake   chan struct{} // buffered(1)
}

func newTopicReader(t *testing.T, addr, topic string, readCommitted bool) *topicReader {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := kafkaClient(t, addr, opts...)
	r := &topicReader{wake: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(rec *kgo.Record) {
				var v any
				s := string(rec.Value)
				if json.Unmarshal(rec.Value, &v) == nil {
					b, _ := json.Marshal(v)
					s = string(b)
				}
				r.mu.Lock()
				r.values = append(r.values, s)
				r.mu.Unlock()
			})
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}()
	return r
}

func (r *topicReader) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.values...)
}

func (r *topicReader) seen(marker string) func(time.Duration) bool {
	return func(d time.Duration) bool {
		timer := time.NewTimer(d)
		defer timer.Stop()
		for {
			if slices.ContainsFunc(r.snapshot(), func(s string) bool { return strings.Contains(s, marker) }) {
				return true
			}
			select {
			case <-r.wake:
			case <-timer.C:
				return false
			}
		}
	}
}

// waitDistinct waits until want distinct values without marker arrived
// and returns every value without marker.
func (r *topicReader) waitDistinct(t *testing.T, marker string, want int) []string {
	t.Helper()
	timer := time.NewTimer(waitBound)
	defer timer.Stop()
	for {
		got := without(r.snapshot(), marker)
		distinct := map[string]bool{}
		for _, g := range got {
			distinct[g] = true
		}
		if len(distinct) >= want {
			return got
		}
		select {
		case <-r.wake:
		case <-timer.C:
			t.Fatalf("timed out after %s: %d of %d distinct values", waitBound, len(distinct), want)
		}
	}
}

// checkOnce compares the values received with want (value -> 1). With
// exact, a duplicate fails; otherwise duplicates (at-least-once) are
// logged and bounded by the number of values.
func checkOnce(t *testing.T, got []string, want map[string]int, exact bool) {
	t.Helper()
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	dups := 0
	for v, c := range seen {
		if c > 1 {
			dups += c - 1
			seen[v] = 1
		}
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Fatalf("values (-want +got):\n%s", diff)
	}
	switch {
	case dups > 0 && exact:
		t.Fatalf("%d duplicates", dups)
	case dups > len(want):
		t.Fatalf("%d duplicates of %d values", dups, len(want))
	case dups > 0:
		t.Logf("%d duplicates (at-least-once)", dups)
	}
}

// eos-kafka: N payments published after the input is positioned arrive
// on payments-mirror exactly once (read committed).
func runEOSKafka(t *testing.T) {
	addr := kafkaCluster(t, "payments", "payments-mirror")
	n := startNode(t, "eos-kafka", []sub{{"127.0.0.1:9092", addr}})
	cl := kafkaClient(t, addr)
	out := newTopicReader(t, addr, "payments-mirror", true)
	untilSeen(t, func() { produce(t, cl, "payments", []byte(`{"id":0,"payer":"marker","cents":0}`)) }, out.seen("marker"))
	const N = 50
	want := map[string]int{}
	var values [][]byte
	for i := 1; i <= N; i++ {
		v := fmt.Sprintf(`{"id":%d,"payer":"p%d","cents":%d}`, i, i, 100*i)
		values = append(values, []byte(v))
		var m any
		_ = json.Unmarshal([]byte(v), &m)
		b, _ := json.Marshal(m)
		want[string(b)] = 1
	}
	produce(t, cl, "payments", values...)
	got := out.waitDistinct(t, "marker", N)
	n.stopClean()
	checkOnce(t, got, want, true)
}

// mqtt_example: of N readings published on plant/<i>/temperature, exactly
// those above 30 degrees arrive, each with its label.
func runMQTT(t *testing.T) {
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := srv.AddHook(new(allowAll), nil); err != nil {
		t.Fatal(err)
	}
	ln := listeners.NewTCP(listeners.Config{ID: "tcp", Address: "127.0.0.1:0"})
	if err := srv.AddListener(ln); err != nil { // listens now
		t.Fatal(err)
	}
	addr := ln.Address()
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := strings.Cut(addr, ":")
	n := startNode(t, "mqtt_example", []sub{{"port: 1883", "port: " + port}})
	waitUntil(t, "the input's subscription to plant/+/temperature", func() bool {
		return len(srv.Topics.Subscribers("plant/p0/temperature").Subscriptions) > 0
	})
	const N = 20
	var want []map[string]any
	for i := range N {
		c := 20 + i // 20..39: those above 30 pass
		if err := srv.Publish(fmt.Sprintf("plant/p%d/temperature", i), fmt.Appendf(nil, `{"plant":"p%d","celsius":%d}`, i, c), false, 1); err != nil {
			t.Fatal(err)
		}
		if c > 30 {
			want = append(want, map[string]any{"plant": fmt.Sprintf("p%d", i), "celsius": float64(c), "label": strconv.Itoa(c)})
		}
	}
	n.waitLines(len(want))
	got := decode(t, n.stopClean())
	slices.SortFunc(got, func(a, b map[string]any) int { return int(a["celsius"].(float64) - b["celsius"].(float64)) })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// allowAll lets every MQTT client in and allows every topic.
type allowAll struct{ mochi.HookBase }

func (*allowAll) ID() string { return "allow-all" }

func (*allowAll) Provides(b byte) bool {
	return b == mochi.OnConnectAuthenticate || b == mochi.OnACLCheck
}

func (*allowAll) OnConnectAuthenticate(*mochi.Client, packets.Packet) bool { return true }

func (*allowAll) OnACLCheck(*mochi.Client, string, bool) bool { return true }

// waitUntil polls cond (state with no notification) until it holds,
// failing after waitBound.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", waitBound, what)
		}
		time.Sleep(10 * time.Millisecond) // polling state that has no notification
	}
}

// startNATS starts an embedded nats-server with JetStream on loopback.
func startNATS(t *testing.T) string {
	t.Helper()
	s, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true, ServerName: "arkflow"})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(waitBound) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

func natsConn(t *testing.T, url string) *natsgo.Conn {
	t.Helper()
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// nats_input_example: N messages stored in the AUDIT stream before the
// node starts reach the durable consumer and come out as {"line": ...}.
func runNATSInput(t *testing.T) {
	url := startNATS(t)
	js, err := jetstream.New(natsConn(t, url))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{"audit.>"}}); err != nil {
		t.Fatal(err)
	}
	const N = 30
	want := map[string]int{}
	for i := 1; i <= N; i++ {
		line := fmt.Sprintf("user u%d signed in", i)
		if _, err := js.Publish(ctx, "audit.login", []byte(line)); err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf(`{"line":%q}`, line)] = 1
	}
	n := startNode(t, "nats_input_example", []sub{{"nats://127.0.0.1:4222", url}})
	n.waitLines(N)
	checkOnce(t, compact(t, n.stopClean()), want, false)
}

// compact rewrites JSON lines compactly, keys sorted.
func compact(t *testing.T, lines []string) []string {
	t.Helper()
	out := make([]string, len(lines))
	for i, m := range decode(t, lines) {
		b, _ := json.Marshal(m)
		out[i] = string(b)
	}
	return out
}

// nats_output_example: each generated message is published on
// doors.events as the original payload (the SQL keeps __value__).
func runNATSOutput(t *testing.T) {
	url := startNATS(t)
	nc := natsConn(t, url)
	msgs := make(chan *natsgo.Msg, 64)
	if _, err := nc.ChanSubscribe("doors.events", msgs); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "nats_output_example", []sub{{"nats://127.0.0.1:4222", url}})
	for range 2 {
		select {
		case m := <-msgs:
			if diff := cmp.Diff(obj(t, `{ "ts": 1700000000000, "reading": 3, "device": "door_8" }`), obj(t, string(m.Data))); diff != "" {
				t.Fatalf("message on doors.events (-want +got):\n%s", diff)
			}
		case <-time.After(waitBound):
			t.Fatalf("no message on doors.events within %s", waitBound)
		}
	}
	n.stopClean()
}

// protobuf_example: the summary survives the Protobuf round trip; the
// generator's readings are all 2.5, so reading is 2.5 times the count.
func runProtobuf(t *testing.T) {
	n := startNodeWith(t, "protobuf_example", nil, func(dir string) {
		protos := filepath.Join(dir, "testdata", "protos")
		if err := os.MkdirAll(protos, 0o755); err != nil {
			t.Fatal(err)
		}
		proto, err := os.ReadFile(filepath.Join(repoDir(), "testdata", "protos", "readings.proto"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(protos, "readings.proto"), proto, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	line := n.waitLines(1)[0]
	n.stopClean()
	row := obj(t, line)
	count, _ := row["ts"].(float64)
	want := map[string]any{"ts": count, "reading": 2.5 * count, "device": strconv.Itoa(int(count))}
	if count < 1 {
		t.Fatalf("summary %s: want ts (a count) >= 1", line)
	}
	if diff := cmp.Diff(want, row); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// redisServer starts redis-server on a free loopback port (skipping when
// it is not installed) and returns its address.
func redisServer(t *testing.T) string {
	t.Helper()
	bin, err := lookRedis()
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server); CI installs it")
	}
	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	dir := t.TempDir()
	startProcess(t, bin, "--port", port, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
		"--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no")
	c := goredis.NewClient(&goredis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	waitUntil(t, "redis-server to answer PING", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return c.Ping(ctx).Err() == nil
	})
	return addr
}

func redisClient(t *testing.T, addr string, db int) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, DB: db})
	t.Cleanup(func() { c.Close() })
	return c
}

// redis_input_example: N messages published on alerts once the input is
// subscribed come out as {"line": ...}, each once.
func runRedisInput(t *testing.T) {
	addr := redisServer(t)
	c := redisClient(t, addr, 0)
	n := startNode(t, "redis_input_example", []sub{{"127.0.0.1:6379", addr}})
	ctx := context.Background()
	waitUntil(t, "the input's subscription to alerts", func() bool {
		m, err := c.PubSubNumSub(ctx, "alerts").Result()
		return err == nil && m["alerts"] > 0
	})
	const N = 30
	want := map[string]int{}
	for i := 1; i <= N; i++ {
		line := fmt.Sprintf("disk %d full", i)
		if err := c.Publish(ctx, "alerts", line).Err(); err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf(`{"line":%q}`, line)] = 1
	}
	n.waitLines(N)
	checkOnce(t, compact(t, n.stopClean()), want, true)
}

// redis_output_example: the row is stored under the key the SQL
// expression makes, in database 2 (and nothing in database 0).
func runRedisOutput(t *testing.T) {
	addr := redisServer(t)
	db2 := redisClient(t, addr, 2)
	n := startNode(t, "redis_output_example", []sub{{"127.0.0.1:6379", addr}})
	ctx := context.Background()
	var v string
	waitUntil(t, "key lamp:lamp_6 in database 2", func() bool {
		var err error
		v, err = db2.Get(ctx, "lamp:lamp_6").Result()
		return err == nil
	})
	n.stopClean()
	if diff := cmp.Diff(map[string]any{"device": "lamp_6", "reading": 1.5}, obj(t, v)); diff != "" {
		t.Errorf("lamp:lamp_6 (-want +got):\n%s", diff)
	}
	if keys, err := db2.DBSize(ctx).Result(); err != nil || keys != 1 {
		t.Errorf("database 2 holds %d keys (%v), want 1", keys, err)
	}
	if keys, err := redisClient(t, addr, 0).DBSize(ctx).Result(); err != nil || keys != 0 {
		t.Errorf("database 0 holds %d keys (%v), want 0", keys, err)
	}
}

// redis_temporary_example: each generated row is joined with the device
// row stored under device:oven_2.
func runRedisTemporary(t *testing.T) {
	addr := redisServer(t)
	c := redisClient(t, addr, 0)
	if err := c.Set(context.Background(), "device:oven_2", `{"name":"oven_2","site":"bakery"}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "redis_temporary_example", []sub{{"127.0.0.1:6379", addr}})
	n.waitLines(2)
	everyLine(t, n.stopClean(), `{"ts":1700000000000,"reading":3,"device":"oven_2","name":"oven_2","site":"bakery"}`)
}

// schema_registry: N Account records in the Confluent wire format
// (magic byte, schema id, message index, Protobuf) decode through the
// registry's schema.
func runSchemaRegistry(t *testing.T) {
	addr := kafkaCluster(t, "accounts")
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/schemas/ids/7" {
			http.Error(w, `{"error_code":40403,"message":"Schema not found"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		schema := "syntax = \"proto3\";\npackage fp.example;\nmessage Account {\n  int64 id = 1;\n  string owner = 2;\n}\n"
		_ = json.NewEncoder(w).Encode(map[string]any{"schemaType": "PROTOBUF", "schema": schema})
	}))
	t.Cleanup(reg.Close)
	n := startNode(t, "schema_registry", []sub{{"127.0.0.1:9092", addr}, {"http://127.0.0.1:18086", reg.URL}})
	account := func(id int64, owner string) []byte {
		b := []byte{0}
		b = binary.BigEndian.AppendUint32(b, 7)
		b = append(b, 0) // message indexes [0]: the first message
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(id))
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		return protowire.AppendString(b, owner)
	}
	cl := kafkaClient(t, addr)
	untilSeen(t, func() { produce(t, cl, "accounts", account(1000, "marker")) }, n.seenLine("marker"))
	const N = 20
	want := map[string]int{}
	var values [][]byte
	for i := 1; i <= N; i++ {
		values = append(values, account(int64(i), fmt.Sprintf("o%d", i)))
		want[fmt.Sprintf(`{"id":%d,"owner":"o%d"}`, i, i)] = 1
	}
	produce(t, cl, "accounts", values...)
	n.waitFor(fmt.Sprintf("%d accounts", N), func(p, _ []string) bool { return len(without(p, "marker")) >= N })
	checkOnce(t, compact(t, without(n.stopClean(), "marker")), want, false)
}

// cdc_debezium: of four change events (create, update, delete, snapshot
// read), the three the SQL keeps arrive, flattened by the codec.
func runCDCDebezium(t *testing.T) {
	addr := kafkaCluster(t, "inventory.products")
	n := startNode(t, "cdc_debezium", []sub{{"127.0.0.1:9092", addr}})
	event := func(op string, id int, title string, price float64) []byte {
		row := fmt.Sprintf(`{"id":%d,"title":%q,"price":%v}`, id, title, price)
		before, after := "null", row
		if op == "d" {
			before, after = row, "null"
		}
		// The JSON converter without schemas: the bare change event.
		return fmt.Appendf(nil, `{"before":%s,"after":%s,"source":{"db":"inventory","table":"products"},"op":%q,"ts_ms":%d}`,
			before, after, op, 1700000000000+id)
	}
	cl := kafkaClient(t, addr)
	untilSeen(t, func() { produce(t, cl, "inventory.products", event("r", 0, "marker", 0)) }, n.seenLine("marker"))
	produce(t, cl, "inventory.products", event("c", 1, "kettle", 20.5), event("u", 1, "kettle", 18.5),
		event("d", 2, "toaster", 30), event("r", 3, "mug", 4))
	n.waitFor("3 change rows", func(p, _ []string) bool { return len(without(p, "marker")) >= 3 })
	got := decode(t, without(n.stopClean(), "marker"))
	want := []map[string]any{
		{"op": "c", "id": 1.0, "title": "kettle", "price": 20.5, "source_table": "products", "ts_ms": 1700000000001.0},
		{"op": "u", "id": 1.0, "title": "kettle", "price": 18.5, "source_table": "products", "ts_ms": 1700000000001.0},
		{"op": "r", "id": 3.0, "title": "mug", "price": 4.0, "source_table": "products", "ts_ms": 1700000000003.0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// sql_input_example: the JSON file in the bucket is queried once, each
// row with scaled = reading * 10, and the node exits by itself.
func runSQLInput(t *testing.T) {
	s3 := startS3(t, "fp-data")
	s3.put(t, "fp-data", "readings.json", []byte("{\"reading\":1,\"device\":\"a\"}\n{\"reading\":2,\"device\":\"b\"}\n{\"reading\":3,\"device\":\"c\"}\n"))
	n := startNode(t, "sql_input_example", []sub{{"http://127.0.0.1:19000", s3.url}})
	code, lines := n.waitExit()
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	want := []map[string]any{
		{"reading": 1.0, "device": "a", "scaled": 10.0},
		{"reading": 2.0, "device": "b", "scaled": 20.0},
		{"reading": 3.0, "device": "c", "scaled": 30.0},
	}
	if diff := cmp.Diff(want, decode(t, lines)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// websocket_input_example: N text frames sent by the server on the first
// connection come out as their payloads (the SQL keeps __value__).
func runWebSocketInput(t *testing.T) {
	const N = 25
	var once sync.Once
	up := gws.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		first := false
		once.Do(func() { first = true })
		if first {
			for i := 1; i <= N; i++ {
				if err := c.WriteMessage(gws.TextMessage, fmt.Appendf(nil, `{"seq":%d}`, i)); err != nil {
					return
				}
			}
		}
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	n := startNode(t, "websocket_input_example", []sub{{"127.0.0.1:18087", strings.TrimPrefix(srv.URL, "http://")}})
	n.waitLines(N)
	want := map[string]int{}
	for i := 1; i <= N; i++ {
		want[fmt.Sprintf(`{"seq":%d}`, i)] = 1
	}
	checkOnce(t, compact(t, n.stopClean()), want, true)
}
