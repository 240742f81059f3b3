package objectstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/stream"
)

const testBucket = "flow"

// s3Server is an in-process S3-compatible server on a fixed loopback
// port whose in-memory backend survives Stop and Start, like a server
// restarted on durable storage.
type s3Server struct {
	t       testing.TB
	addr    string
	backend *s3mem.Backend
	// slow makes the server send response bodies in small pieces with
	// pauses, like a slow link, so that a stop cuts a download midway.
	slow bool

	mu  sync.Mutex // guards srv
	srv *httptest.Server
}

// newS3Server reserves a loopback port and prepares a server with bucket
// testBucket, not started. It points the AWS SDK at test credentials and
// away from any real configuration or metadata service.
func newS3Server(t testing.TB) *s3Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	b := s3mem.New()
	if err := b.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	s := &s3Server{t: t, addr: addr, backend: b}
	t.Cleanup(s.Stop)
	return s
}

// url is the bucket URL of prefix in testBucket.
func (s *s3Server) url(prefix string) string {
	return fmt.Sprintf("s3://%s/%s?region=us-east-1&use_path_style=true&endpoint=http://%s", testBucket, prefix, s.addr)
}

// Start serves on the reserved port, retrying briefly while the port is
// still held by the previous server's sockets.
func (s *s3Server) Start() {
	s.t.Helper()
	var ln net.Listener
	var err error
	for range 100 {
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("listen %s: %v", s.addr, err)
	}
	var h http.Handler = gofakes3.New(s.backend).Server()
	if s.slow {
		h = slowBodies(h)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = ln
	srv.Config.ErrorLog = nil
	srv.Start()
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

// slowBodies sends response bodies in 16 KiB pieces, pausing after each.
func slowBodies(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(slowWriter{w}, r)
	})
}

type slowWriter struct{ http.ResponseWriter }

func (w slowWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), 16<<10)
		m, err := w.ResponseWriter.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		if f, ok := w.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		time.Sleep(2 * time.Millisecond)
		p = p[k:]
	}
	return n, nil
}

// Stop cuts every connection (a read in progress fails) and stops
// serving.
func (s *s3Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.CloseClientConnections()
		srv.Close()
	}
}

// put stores an object straight in the backend.
func (s *s3Server) put(key string, data []byte) {
	s.t.Helper()
	if _, err := s.backend.PutObject(testBucket, key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		s.t.Fatal(err)
	}
}

// objects returns every object under prefix, read from the backend.
func (s *s3Server) objects(prefix string) map[string][]byte {
	s.t.Helper()
	list, err := s.backend.ListBucket(testBucket, &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, c := range list.Contents {
		if !strings.HasPrefix(c.Key, prefix) {
			continue
		}
		o, err := s.backend.GetObject(testBucket, c.Key, nil)
		if err != nil {
			s.t.Fatal(err)
		}
		b, err := io.ReadAll(o.Contents)
		_ = o.Contents.Close()
		if err != nil {
			s.t.Fatal(err)
		}
		out[c.Key] = b
	}
	return out
}

// fileObjects returns every regular file under dir by slash path.
func fileObjects(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// records splits objects into their records: lines, or JSON array
// elements for keys ending in .json(.gz); .gz objects are gunzipped.
func records(t testing.TB, objs map[string][]byte) []string {
	t.Helper()
	var out []string
	for k, b := range objs {
		if strings.HasSuffix(k, gzipSuffix) {
			var err error
			if b, err = gunzip(b); err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			k = strings.TrimSuffix(k, gzipSuffix)
		}
		if strings.HasSuffix(k, ".json") {
			recs, err := decodeAll(codecJSONArray, b)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			for _, r := range recs {
				out = append(out, string(r))
			}
			continue
		}
		out = append(out, lines(string(b))...)
	}
	return out
}

func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func gz(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// countIDs counts each "id" value seen in payloads shaped {"id": N}; it
// fails on anything else.
func countIDs(t testing.TB, payloads []string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, p := range payloads {
		i := strings.Index(p, `"id":`)
		if i < 0 {
			t.Fatalf("payload %q has no id", p)
		}
		rest := strings.TrimSpace(p[i+5:])
		j := strings.IndexAny(rest, ",}")
		if j < 0 {
			t.Fatalf("payload %q has no id", p)
		}
		seen[strings.TrimSpace(rest[:j])]++
	}
	return seen
}

// checkAll requires ids 1..n each at least once and reports duplicates.
func checkAll(t testing.TB, seen map[string]int, n int) {
	t.Helper()
	dups := 0
	for i := 1; i <= n; i++ {
		c := seen[fmt.Sprint(i)]
		if c == 0 {
			t.Errorf("id %d lost", i)
		}
		dups += max(c-1, 0)
	}
	if len(seen) != n {
		t.Errorf("%d distinct ids, want %d", len(seen), n)
	}
	t.Logf("%d ids, %d duplicates", n, dups)
	if dups > n {
		t.Errorf("%d duplicates for %d ids: more than one redelivery each", dups, n)
	}
}

// node is a node configuration running one stream "s".
func node(input, output string) string {
	return `logging: {level: warn}
health_check: {enabled: false, observability: {enabled: false}}
streams:
  - id: s
    input:
` + indent(input, 6) + `
    pipeline: {thread_num: 1, processors: []}
    output:
` + indent(output, 6) + "\n"
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range ls {
		ls[i] = pad + l
	}
	return strings.Join(ls, "\n")
}

// waitState waits for stream "s" of e to reach state.
func waitState(t *testing.T, e *engine.Engine, state stream.State, within time.Duration) engine.StreamStatus {
	t.Helper()
	var st engine.StreamStatus
	componenttest.WaitFor(t, "stream state "+string(state), within, func() bool {
		st = componenttest.Stream(t, e, "s")
		if st.State == stream.StateFailed {
			t.Fatalf("stream failed: %s", st.LastError)
		}
		return st.State == state
	})
	return st
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newInput(t *testing.T, conf map[string]any) *Input {
	t.Helper()
	in, err := component.Default.NewInput("object_store", conf, component.Resources{})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return in.(*Input)
}

// readAll reads until the end of input (at most max reads), acknowledging
// each batch with ack's result, and returns the payloads of the batches
// acknowledged with nil.
func readAll(t *testing.T, ctx context.Context, in component.Input, max int, ack func(i int) error) []string {
	t.Helper()
	var got []string
	for i := range max {
		b, a, err := in.Read(ctx)
		if errors.Is(err, message.ErrEndOfInput) {
			return got
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		aerr := ack(i)
		if aerr == nil {
			for j := range b.Messages {
				p, _ := b.Messages[j].Payload()
				got = append(got, string(p))
			}
		}
		if err := a(ctx, aerr); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("no end of input after %d reads", max)
	return nil
}

func ackNil(int) error { return nil }
