package objectstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/stream"
)

// generate is an input of n messages {"id": 1..n}.
func generate(n, batch int, interval string) string {
	return fmt.Sprintf("type: generate\ncontext: '{\"id\": {{count}}}'\ncount: %d\nbatch_size: %d\ninterval: %s\n", n, batch, interval)
}

// fileOut is a file output to path.
func fileOut(path string) string {
	return fmt.Sprintf("type: file\npath: %s\n", path)
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return lines(string(b))
}

// roundTrip writes n messages through the object_store output at url
// (with extra output settings) and reads them back through the
// object_store input, both in streams.
func roundTrip(t *testing.T, url, outExtra, inExtra string, objects func() map[string][]byte) {
	t.Helper()
	const n = 57
	e := componenttest.Engine(t, node(generate(n, 5, "0s"),
		fmt.Sprintf("type: object_store\nurl: '%s'\n%s", url, outExtra)))
	st := waitState(t, e, stream.StateCompleted, 30*time.Second)
	if st.Sent != n {
		t.Errorf("output sent %d, want %d", st.Sent, n)
	}
	objs := objects()
	if len(objs) != 12 { // 11 batches of 5 and one of 2
		t.Errorf("%d objects, want 12: %v", len(objs), keys(objs))
	}
	checkAll(t, countIDs(t, records(t, objs)), n)

	out := filepath.Join(t.TempDir(), "out.jsonl")
	e2 := componenttest.Engine(t, node(fmt.Sprintf("type: object_store\nurl: '%s'\nbatch_size: 4\n%s", url, inExtra), fileOut(out)))
	st = waitState(t, e2, stream.StateCompleted, 30*time.Second)
	if st.Received != n {
		t.Errorf("input received %d, want %d", st.Received, n)
	}
	got := readLines(t, out)
	if len(got) != n {
		t.Errorf("read %d messages back, want %d", len(got), n)
	}
	checkAll(t, countIDs(t, got), n)
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestStreamRoundTripFile(t *testing.T) {
	tests := []struct {
		name, outExtra, inExtra string
	}{
		{"lines", "path: 'b/{{date}}/{{timestamp_unix_nano}}-{{count}}.jsonl'\n", "prefix: b/\n"},
		{"json_array gzip", "codec: json_array\ncompression: gzip\n", "codec: json_array\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			roundTrip(t, "file://"+dir, tt.outExtra, tt.inExtra, func() map[string][]byte { return fileObjects(t, dir) })
		})
	}
}

func TestStreamRoundTripS3(t *testing.T) {
	s := newS3Server(t)
	s.Start()
	tests := []struct {
		name, prefix, outExtra, inExtra string
	}{
		{"lines gzip", "gz", "compression: gzip\n", ""},
		{"json_array", "arr", "codec: json_array\npath: '{{stream}}-{{uuid}}.json'\n", "codec: json_array\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			roundTrip(t, s.url(tt.prefix), tt.outExtra, tt.inExtra, func() map[string][]byte { return s.objects(tt.prefix + "/") })
		})
	}
}

// TestStreamDeleteAfterRead: every object read and acknowledged is gone.
func TestStreamDeleteAfterRead(t *testing.T) {
	s := newS3Server(t)
	s.Start()
	for i := range 5 {
		s.put(fmt.Sprintf("in/%02d.jsonl", i), []byte(fmt.Sprintf("{\"id\": %d}\n{\"id\": %d}\n", 2*i+1, 2*i+2)))
	}
	s.put("other/x.jsonl", []byte("{\"id\": 99}\n"))
	out := filepath.Join(t.TempDir(), "out.jsonl")
	e := componenttest.Engine(t, node(fmt.Sprintf("type: object_store\nurl: '%s'\nprefix: in/\nbatch_size: 1\ndelete_after_read: true\n", s.url("")), fileOut(out)))
	waitState(t, e, stream.StateCompleted, 30*time.Second)
	checkAll(t, countIDs(t, readLines(t, out)), 10)
	if left := keys(s.objects("")); len(left) != 1 || left[0] != "other/x.jsonl" {
		t.Errorf("objects left %v, want only other/x.jsonl", left)
	}
}

// TestStreamServerDownAtStart: with nothing listening, the stream stays
// starting with a clear error, then runs once the server is up.
func TestStreamServerDownAtStart(t *testing.T) {
	for _, side := range []string{"output", "input"} {
		t.Run(side, func(t *testing.T) {
			s := newS3Server(t)
			out := filepath.Join(t.TempDir(), "out.jsonl")
			var doc string
			if side == "output" {
				doc = node(generate(20, 4, "0s"), fmt.Sprintf("type: object_store\nurl: '%s'\n", s.url("down")))
			} else {
				for i := range 4 {
					s.put(fmt.Sprintf("down/%d", i), []byte(fmt.Sprintf("{\"id\": %d}\n{\"id\": %d}\n{\"id\": %d}\n{\"id\": %d}\n{\"id\": %d}\n", 5*i+1, 5*i+2, 5*i+3, 5*i+4, 5*i+5)))
				}
				doc = node(fmt.Sprintf("type: object_store\nurl: '%s'\n", s.url("down")), fileOut(out))
			}
			e := componenttest.Engine(t, doc)
			var st = componenttest.Stream(t, e, "s")
			componenttest.WaitFor(t, "a connect error", 20*time.Second, func() bool {
				st = componenttest.Stream(t, e, "s")
				return st.LastError != ""
			})
			if st.State != stream.StateStarting || e.Ready() {
				t.Errorf("state %s, ready %v; want starting and not ready", st.State, e.Ready())
			}
			if !strings.Contains(st.LastError, "object_store "+side) || !strings.Contains(st.LastError, "connect: connection refused") {
				t.Errorf("error %q does not say which component and why", st.LastError)
			}
			if strings.Contains(st.LastError, "secret") || strings.Contains(st.LastError, "region=") {
				t.Errorf("error %q shows the URL's query", st.LastError)
			}
			t.Logf("while down: %s", st.LastError)
			s.Start()
			st = waitState(t, e, stream.StateCompleted, 30*time.Second)
			if side == "output" {
				checkAll(t, countIDs(t, records(t, s.objects("down/"))), 20)
			} else {
				checkAll(t, countIDs(t, readLines(t, out)), 20)
			}
		})
	}
}

// TestStreamOutputServerRestart: the server goes away while batches are
// being written and comes back; every message ends up in an object.
func TestStreamOutputServerRestart(t *testing.T) {
	const n = 300
	s := newS3Server(t)
	s.Start()
	e := componenttest.Engine(t, node(generate(n, 3, "2ms"), fmt.Sprintf("type: object_store\nurl: '%s'\n", s.url("r"))))
	componenttest.WaitFor(t, "some objects", 20*time.Second, func() bool { return len(s.objects("r/")) >= 10 })
	s.Stop()
	componenttest.WaitFor(t, "a failed write", 20*time.Second, func() bool {
		return componenttest.Stream(t, e, "s").Retries > 0
	})
	t.Logf("stopped after %d objects", len(s.objects("r/")))
	s.Start()
	waitState(t, e, stream.StateCompleted, 40*time.Second)
	checkAll(t, countIDs(t, records(t, s.objects("r/"))), n)
}

// TestStreamInputServerRestart: the server goes away while objects are
// being read (a large one among them, so a read is likely cut mid-object)
// and comes back; every record is delivered.
func TestStreamInputServerRestart(t *testing.T) {
	id := 0
	var big strings.Builder
	for range 20000 {
		id++
		fmt.Fprintf(&big, "{\"id\": %d, \"pad\": \"%s\"}\n", id, strings.Repeat("x", 100))
	}
	s := newS3Server(t)
	s.slow = true
	s.put("in/000-big.jsonl", []byte(big.String()))
	for i := range 20 {
		var b strings.Builder
		for range 50 {
			id++
			fmt.Fprintf(&b, "{\"id\": %d}\n", id)
		}
		s.put(fmt.Sprintf("in/%03d.jsonl.gz", i+1), gz(t, b.String()))
	}
	s.Start()
	out := filepath.Join(t.TempDir(), "out.jsonl")
	e := componenttest.Engine(t, node(fmt.Sprintf("type: object_store\nurl: '%s'\nbatch_size: 10\n", s.url("in")), fileOut(out)))
	componenttest.WaitFor(t, "some records", 20*time.Second, func() bool {
		return componenttest.Stream(t, e, "s").Sent >= 500
	})
	s.Stop()
	componenttest.WaitFor(t, "a failed read", 20*time.Second, func() bool {
		st := componenttest.Stream(t, e, "s")
		return st.Retries > 0 || st.State == stream.StateCompleted
	})
	st := componenttest.Stream(t, e, "s")
	t.Logf("stopped after %d records; %d retries, last error: %s", st.Sent, st.Retries, st.LastError)
	s.Start()
	st = waitState(t, e, stream.StateCompleted, 40*time.Second)
	if st.Retries == 0 {
		t.Errorf("the input never failed: the test did not restart the server mid-stream")
	}
	checkAll(t, countIDs(t, readLines(t, out)), id)
}
