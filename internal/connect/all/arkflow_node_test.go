package all_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// waitBound bounds every wait of TestArkFlowExamplesRun: it only keeps a
// broken example from hanging the test, it is not a timing assertion.
const waitBound = 30 * time.Second

// binary is the flowplane binary the examples run in, built once per test
// process (see TestMain) into binaryDir.
var (
	binaryOnce sync.Once
	binaryDir  string
	binaryPath string
	binaryErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binaryDir != "" {
		_ = os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}

// repoDir is the repository root, absolute (tests may change directory).
var repoDir = sync.OnceValue(func() string {
	d, err := filepath.Abs("../../..")
	if err != nil {
		panic(err)
	}
	return d
})

// flowplaneBinary builds ./cmd/flowplane the first time it is called.
func flowplaneBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		if binaryDir, binaryErr = os.MkdirTemp("", "flowplane-arkflow-"); binaryErr != nil {
			return
		}
		binaryPath = filepath.Join(binaryDir, "flowplane")
		cmd := exec.Command("go", "build", "-o", binaryPath, "./cmd/flowplane")
		cmd.Dir = repoDir()
		if out, err := cmd.CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("go build ./cmd/flowplane: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// sub is one substitution in an example's text: every occurrence of old
// becomes new. old must occur, so a changed example fails loudly.
type sub struct{ old, new string }

// node is a flowplane child process running one example. Its standard
// output is split into payload lines (those that are JSON: the stdout
// output's) and log lines (the plain slog format, "time=... level=...").
type node struct {
	t    *testing.T
	name string
	dir  string // the working directory: the example's relative paths land here
	api  string // the API address the test gave an example without health_check
	cmd  *exec.Cmd

	mu       sync.Mutex // guards payloads, logs
	payloads []string
	logs     []string
	stderr   bytes.Buffer // written by exec until done is closed

	wake chan struct{} // buffered(1): a line arrived or the process ended
	done chan struct{} // closed when the process ended and its output was read
	code int           // exit code, set before done is closed
}

// startNode writes the example with subs applied into a temporary
// directory and runs it there: `flowplane --config <file> --state-dir
// <dir>/state`, with env added to the environment.
func startNode(t *testing.T, name string, subs []sub, env ...string) *node {
	t.Helper()
	return launch(t, name, subs, env, nil)
}

// startNodeWith is startNode with prepare called on the working directory
// before the process starts.
func startNodeWith(t *testing.T, name string, subs []sub, prepare func(dir string)) *node {
	t.Helper()
	return launch(t, name, subs, nil, prepare)
}

func launch(t *testing.T, name string, subs []sub, env []string, prepare func(dir string)) *node {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoDir(), "testdata", "arkflow", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for _, s := range subs {
		if !strings.Contains(text, s.old) {
			t.Fatalf("%s.yaml does not contain %q: update the substitution table", name, s.old)
		}
		text = strings.ReplaceAll(text, s.old, s.new)
	}
	api := ""
	if !strings.Contains(text, "\nhealth_check:") {
		api = freeAddr(t)
		text += fmt.Sprintf("health_check:\n  address: %q\n", api)
	}
	dir := t.TempDir()
	if prepare != nil {
		prepare(dir)
	}
	cfg := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, name: name, dir: dir, api: api, wake: make(chan struct{}, 1), done: make(chan struct{})}
	n.cmd = exec.Command(flowplaneBinary(t), "--config", cfg, "--state-dir", filepath.Join(dir, "state"))
	n.cmd.Dir = dir
	n.cmd.Env = append(os.Environ(), "AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE="+filepath.Join(dir, "none"),
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "none"))
	n.cmd.Env = append(n.cmd.Env, env...)
	n.cmd.Stderr = &n.stderr
	out, err := n.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go n.read(out)
	t.Cleanup(func() {
		n.stop()
		if t.Failed() {
			n.mu.Lock()
			t.Logf("%s: last log lines:\n%s\nstderr:\n%s", name, strings.Join(tail(n.logs, 30), "\n"), n.stderr.String())
			n.mu.Unlock()
		}
	})
	return n
}

func (n *node) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		n.mu.Lock()
		if json.Valid([]byte(line)) {
			n.payloads = append(n.payloads, line)
		} else {
			n.logs = append(n.logs, line)
		}
		n.mu.Unlock()
		n.poke()
	}
	err := n.cmd.Wait()
	n.code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		n.code = ee.ExitCode()
	} else if err != nil {
		n.code = -1
	}
	close(n.done)
	n.poke()
}

func (n *node) poke() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// snapshot returns the payload lines so far.
func (n *node) snapshot() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.payloads...)
}

// waitFor waits until cond holds over the payload lines and log lines,
// failing after waitBound or when the process ends first.
func (n *node) waitFor(what string, cond func(payloads, logs []string) bool) {
	n.t.Helper()
	timer := time.NewTimer(waitBound)
	defer timer.Stop()
	for {
		n.mu.Lock()
		ok := cond(n.payloads, n.logs)
		got := len(n.payloads)
		n.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-n.wake:
		case <-n.done:
			n.mu.Lock()
			ok := cond(n.payloads, n.logs)
			n.mu.Unlock()
			if !ok {
				n.t.Fatalf("%s exited (code %d) before %s (%d payload lines)", n.name, n.code, what, got)
			}
			return
		case <-timer.C:
			n.t.Fatalf("timed out after %s waiting for %s (%d payload lines)", waitBound, what, got)
		}
	}
}

// waitLines waits for at least want payload lines and returns them all.
func (n *node) waitLines(want int) []string {
	n.t.Helper()
	n.waitFor(fmt.Sprintf("%d payload lines", want), func(p, _ []string) bool { return len(p) >= want })
	return n.snapshot()
}

// waitLog waits for a log line matching re and returns its submatches.
func (n *node) waitLog(re *regexp.Regexp) []string {
	n.t.Helper()
	var m []string
	n.waitFor("a log line matching "+re.String(), func(_, logs []string) bool {
		for _, l := range logs {
			if m = re.FindStringSubmatch(l); m != nil {
				return true
			}
		}
		return false
	})
	return m
}

// waitExit waits for the process to end by itself and returns its exit
// code and every payload line.
func (n *node) waitExit() (int, []string) {
	n.t.Helper()
	select {
	case <-n.done:
	case <-time.After(waitBound):
		n.t.Fatalf("%s did not exit by itself within %s", n.name, waitBound)
	}
	return n.code, n.snapshot()
}

// stop sends SIGTERM, then SIGKILL after 10 s, and returns the exit code
// and every payload line.
func (n *node) stop() (int, []string) {
	select {
	case <-n.done:
		return n.code, n.snapshot()
	default:
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		n.t.Errorf("%s did not stop within 10s of SIGTERM; killing it", n.name)
		_ = n.cmd.Process.Kill()
		<-n.done
	}
	return n.code, n.snapshot()
}

// stopClean stops the process and requires exit code 0.
func (n *node) stopClean() []string {
	n.t.Helper()
	code, lines := n.stop()
	if code != 0 {
		n.t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	return lines
}

// streamEnded reads the counters of the "stream ended" log line.
var streamEnded = regexp.MustCompile(`msg="stream ended".* received=(\d+) sent=(\d+) dropped=(\d+) errors=(\d+)`)

// endCounts returns received, sent, dropped and errors of the stream's
// "stream ended" log line (the process must have ended).
func (n *node) endCounts() [4]int {
	n.t.Helper()
	m := n.waitLog(streamEnded)
	var c [4]int
	for i := range c {
		c[i], _ = strconv.Atoi(m[i+1])
	}
	return c
}

func tail(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// decode parses JSON lines into objects.
func decode(t *testing.T, lines []string) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &out[i]); err != nil {
			t.Fatalf("line %d is not a JSON object: %v: %s", i, err, l)
		}
	}
	return out
}

// obj parses one JSON object.
func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, s)
	}
	return m
}

// handedOut holds the addresses freeAddr returned, so that two examples
// running side by side never get the same one.
var handedOut sync.Map

// freeAddr returns a loopback address nothing listens on (for now), for a
// child process to listen on; servers in the test listen on port 0.
func freeAddr(t *testing.T) string {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if _, taken := handedOut.LoadOrStore(addr, true); !taken {
			return addr
		}
	}
}

// kafkaCluster starts a one-broker kfake cluster with one-partition topics
// (so that a marker seen means every partition is positioned).
func kafkaCluster(t *testing.T, topics ...string) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

func kafkaClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produce(t *testing.T, cl *kgo.Client, topic string, values ...[]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Value: v}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// untilSeen publishes markers until one is seen: an input that starts
// from the latest offset (or a live subscription) only receives what is
// published after it is positioned, which nothing else reports. Each
// round publishes a marker and waits up to a second for it; the bound is
// the usual one.
func untilSeen(t *testing.T, publish func(), seen func(wait time.Duration) bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for time.Now().Before(deadline) {
		publish()
		if seen(time.Second) {
			return
		}
	}
	t.Fatalf("no marker arrived within %s", waitBound)
}

// seenLine returns a seen function for untilSeen: a payload line holding
// marker arrived.
func (n *node) seenLine(marker string) func(time.Duration) bool {
	return func(d time.Duration) bool {
		timer := time.NewTimer(d)
		defer timer.Stop()
		for {
			for _, l := range n.snapshot() {
				if strings.Contains(l, marker) {
					return true
				}
			}
			select {
			case <-n.wake:
			case <-n.done:
				return false
			case <-timer.C:
				return false
			}
		}
	}
}

// without returns the lines not holding marker.
func without(lines []string, marker string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, marker) {
			out = append(out, l)
		}
	}
	return out
}

// s3Fake is gofakes3 over an in-memory backend on a loopback port.
type s3Fake struct {
	url     string // http://127.0.0.1:port
	backend *s3mem.Backend
}

func startS3(t *testing.T, buckets ...string) *s3Fake {
	t.Helper()
	b := s3mem.New()
	for _, name := range buckets {
		if err := b.CreateBucket(name); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(gofakes3.New(b).Server())
	t.Cleanup(srv.Close)
	return &s3Fake{url: srv.URL, backend: b}
}

// keys lists the objects of bucket under prefix.
func (s *s3Fake) keys(t *testing.T, bucket, prefix string) []string {
	t.Helper()
	list, err := s.backend.ListBucket(bucket, &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range list.Contents {
		if strings.HasPrefix(c.Key, prefix) {
			out = append(out, c.Key)
		}
	}
	return out
}

func (s *s3Fake) put(t *testing.T, bucket, key string, data []byte) {
	t.Helper()
	if _, err := s.backend.PutObject(bucket, key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
}

// recorder is an HTTP server that records the requests it gets.
type recorder struct {
	srv  *httptest.Server
	reqs chan recorded
}

type recorded struct {
	method, path, auth string
	body               []byte
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{reqs: make(chan recorded, 1024)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		select {
		case r.reqs <- recorded{req.Method, req.URL.Path, req.Header.Get("Authorization"), body}:
		default: // the test has what it needs
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// next returns the next recorded request, failing after waitBound.
func (r *recorder) next(t *testing.T) recorded {
	t.Helper()
	select {
	case req := <-r.reqs:
		return req
	case <-time.After(waitBound):
		t.Fatalf("no request within %s", waitBound)
		return recorded{}
	}
}

// lookRedis finds redis-server.
func lookRedis() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err == nil {
		return bin, nil
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err != nil {
		return "", err
	}
	return "/usr/bin/redis-server", nil
}

// startProcess runs a server process until the test ends.
func startProcess(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
}
