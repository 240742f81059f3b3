package engine

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/stream"
	"github.com/flowplane/flowplane/internal/wal/objstore"
)

// The crash child's environment: its mode (run: an endless input, and an
// output that delivers the first objCrashDelivered batches and then hangs
// (one pipeline thread, so they are the first in read order);
// drain: no input, a working output), the S3 endpoint and the file the
// output appends delivered message numbers to.
const (
	objCrashMode      = "FP_OBJWAL_CRASH_MODE"
	objCrashEndpoint  = "FP_OBJWAL_CRASH_ENDPOINT"
	objCrashOut       = "FP_OBJWAL_CRASH_OUT"
	objCrashBatch     = 5
	objCrashDelivered = 40
	objCrashKillAfter = 300 // messages acknowledged to the input
)

// numberedInput produces batches of objCrashBatch messages numbered from
// 0 without end (or ends at once), and prints "a <n>" on stdout for every
// message acknowledged to it with nil.
type numberedInput struct {
	end  bool
	next int
	mu   sync.Mutex // guards stdout
}

func (in *numberedInput) Connect(context.Context) error { return nil }
func (in *numberedInput) Close(context.Context) error   { return nil }

func (in *numberedInput) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if in.end {
		return message.Batch{}, nil, message.ErrEndOfInput
	}
	var b message.Batch
	first := in.next
	for range objCrashBatch {
		b.Messages = append(b.Messages, message.New(fmt.Appendf(nil, "%08d", in.next)))
		in.next++
	}
	return b, func(_ context.Context, err error) error {
		if err == nil {
			in.mu.Lock()
			var sb strings.Builder
			for n := first; n < first+objCrashBatch; n++ {
				fmt.Fprintf(&sb, "a %d\n", n)
			}
			_, _ = os.Stdout.WriteString(sb.String())
			in.mu.Unlock()
		}
		return nil
	}, nil
}

// fileOutput appends the numbers of the messages it delivers to a file,
// one write per batch; with limit > 0 it hangs after limit batches.
type fileOutput struct {
	f     *os.File
	limit int64
	n     atomic.Int64
}

func (o *fileOutput) Connect(context.Context) error { return nil }
func (o *fileOutput) Close(context.Context) error   { return nil }

func (o *fileOutput) Write(ctx context.Context, b message.Batch) error {
	if o.limit > 0 && o.n.Add(1) > o.limit {
		<-ctx.Done()
		return ctx.Err()
	}
	var sb strings.Builder
	for i := range b.Messages {
		p, _ := b.Messages[i].Payload()
		n, _ := strconv.Atoi(string(p))
		fmt.Fprintf(&sb, "%d\n", n)
	}
	_, err := o.f.WriteString(sb.String())
	return err
}

// crashBackend is the durability.backend the child runs with: ArkFlow's
// shape, S3 settings and all.
func crashBackend(endpoint string) *config.Durability {
	return &config.Durability{
		Enabled: true, Sync: "group_commit", MaxBytes: 1 << 30,
		Backend: &config.WALBackend{
			Type: "object_store", NodeID: "node-1", StreamID: "crash", Prefix: "fp/wal",
			S3: &config.WALS3{
				Bucket: "fp-wal", Region: "us-east-1", Endpoint: endpoint,
				AccessKeyID: "local-key", SecretAccessKey: "local-secret", AllowHTTP: true,
			},
			SegmentTuning: &config.WALSegmentTuning{Strategy: "low_latency"},
			Cursor:        &config.WALCursor{MaxEntries: 10, Interval: "50ms"},
			ParallelPut:   &config.WALParallelPut{Workers: 2},
			Compression:   &config.WALCompression{Type: "zstd"},
		},
	}
}

// TestObjectWALCrashChild is the child process of TestObjectWALCrash; it
// does nothing in a normal test run.
func TestObjectWALCrashChild(t *testing.T) {
	mode := os.Getenv(objCrashMode)
	if mode == "" {
		t.Skip("the child of TestObjectWALCrash")
	}
	f, err := os.OpenFile(os.Getenv(objCrashOut), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res := component.Resources{StreamID: "crash", Logger: log}
	d := crashBackend(os.Getenv(objCrashEndpoint))
	if ps := (&config.Config{Streams: []config.Stream{{ID: "crash", Durability: d}}}).Validate(nil); len(ps) > 0 {
		t.Fatalf("the backend does not validate: %v", ps)
	}
	w, err := walFor(config.Stream{ID: "crash", Durability: d}, t.TempDir(), res)
	if err != nil {
		t.Fatal(err)
	}
	out := &fileOutput{f: f}
	in := &numberedInput{end: mode == "drain"}
	if mode == "run" {
		out.limit = objCrashDelivered
	}
	s, err := stream.New(stream.Config{
		ID: "crash", Input: in, Output: out, WAL: w, ThreadNum: 1, Logger: log,
		WALMaxBytes: 1 << 30, WALAppendDepth: w.(*objectWAL).depth,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestObjectWALCrash runs a stream whose WAL is in an S3-compatible server
// (gofakes3 on 127.0.0.1, in this process, so it outlives the child) in a
// child process, SIGKILLs it once objCrashKillAfter messages were
// acknowledged to the input while its output delivered only the first
// objCrashDelivered batches, restarts it to drain the WAL, and checks that
// every message acknowledged before the kill was delivered. The kill comes
// once the cursor object covers the delivered batches, so nothing may be
// delivered twice; the batches only acknowledged to the input must all
// come back from the WAL.
func TestObjectWALCrash(t *testing.T) {
	be := s3mem.New()
	if err := be.CreateBucket("fp-wal"); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(gofakes3.New(be).Server())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	outPath := t.TempDir() + "/delivered"

	child := func(mode string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestObjectWALCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), objCrashMode+"="+mode, objCrashEndpoint+"="+srv.URL, objCrashOut+"="+outPath)
		cmd.Stderr = os.Stderr
		return cmd
	}

	// Run, and kill once enough was acknowledged to the input.
	cmd := child("run")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	acked := map[int]bool{}
	killed, lines := false, 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || f[0] != "a" {
			continue // go test's own output
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("child printed %q", sc.Text())
		}
		acked[n] = true
		lines++
		// Kill once enough was acknowledged and the cursor says the
		// delivered batches were acknowledged to the WAL.
		if len(acked) >= objCrashKillAfter && !killed && lines%200 == 0 && crashCursor(t, be) == objCrashDelivered+1 {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	timer.Stop()
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("the child ended with %d messages acknowledged, before it was killed", len(acked))
	}
	before := deliveredCounts(t, outPath)

	// Restart: the child replays the WAL and ends with its input.
	cmd = child("drain")
	cmd.Stdout = os.Stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the restarted child failed: %v", err)
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the restarted child did not drain the WAL within 60s")
	}
	after := deliveredCounts(t, outPath)

	nBefore := 0
	for n, c := range before {
		nBefore += c
		if c > 1 {
			t.Errorf("message %d delivered %d times before the kill", n, c)
		}
	}
	if nBefore != objCrashDelivered*objCrashBatch {
		t.Fatalf("%d messages delivered before the kill; the output takes %d batches", nBefore, objCrashDelivered)
	}
	lost, dups, replayed := 0, 0, 0
	for n := range acked {
		switch {
		case after[n] == 0:
			lost++
			if lost <= 5 {
				t.Errorf("message %d was acknowledged to the input and never delivered", n)
			}
		case after[n] > 1:
			dups += after[n] - 1
		}
		if before[n] == 0 && after[n] > 0 {
			replayed++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged messages lost", lost, len(acked))
	}
	if dups != 0 {
		t.Fatalf("%d redeliveries: the cursor written before the kill covered every delivered batch", dups)
	}
	if replayed < objCrashKillAfter-nBefore {
		t.Fatalf("only %d messages came from the WAL after the restart", replayed)
	}
	t.Logf("%d acknowledged before the kill, %d delivered before it, %d from the WAL after it, %d redelivered", len(acked), nBefore, replayed, dups)
}

// crashCursor reads the crash child's WAL cursor from the fake S3's
// backend (0: not written yet).
func crashCursor(t *testing.T, be *s3mem.Backend) uint64 {
	obj, err := be.GetObject("fp-wal", "fp/wal/node-1/crash/cursor", nil)
	if err != nil {
		return 0
	}
	defer obj.Contents.Close()
	b, err := io.ReadAll(obj.Contents)
	if err != nil || len(b) < 8 {
		t.Fatalf("cursor object: %d bytes, %v", len(b), err)
	}
	return binary.LittleEndian.Uint64(b)
}

// deliveredCounts reads the output file: message number -> deliveries.
// A partial last line (a write cut by the kill) is ignored.
func deliveredCounts(t *testing.T, path string) map[int]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[int]int{}
	s := string(data)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	} else {
		s = ""
	}
	for _, l := range strings.Split(s, "\n") {
		if l == "" {
			continue
		}
		n, err := strconv.Atoi(l)
		if err != nil {
			t.Fatalf("output line %q", l)
		}
		out[n]++
	}
	return out
}

// TestObjectWALOptions checks how a backend's settings resolve: the
// balanced preset by default, segment overrides it, segment_tuning (a
// preset with overrides) takes precedence over segment, as in ArkFlow.
func TestObjectWALOptions(t *testing.T) {
	five := 5
	for _, tc := range []struct {
		name string
		b    config.WALBackend
		want objstore.Options
	}{
		{"defaults", config.WALBackend{Prefix: "fp/wal", NodeID: "n", StreamID: "s"},
			objstore.Options{Prefix: "fp/wal/n/s/", MaxEntries: 1000, MaxBytes: 1 << 20}},
		{"segment", config.WALBackend{Prefix: "p", NodeID: "n", StreamID: "s",
			Segment: &config.WALSegment{MaxEntries: 2000, MaxBytes: 2097152, FlushInterval: "2s"},
			Cursor:  &config.WALCursor{MaxEntries: 2000, Interval: "2s"}},
			objstore.Options{Prefix: "p/n/s/", MaxEntries: 2000, MaxBytes: 2097152, CursorMaxEntries: 2000, CursorInterval: 2 * time.Second}},
		{"tuning over segment", config.WALBackend{Prefix: "p", NodeID: "n", StreamID: "s",
			Segment:       &config.WALSegment{MaxEntries: 2000},
			SegmentTuning: &config.WALSegmentTuning{Strategy: "aggressive", MaxBytes: 4096},
			ParallelPut:   &config.WALParallelPut{Workers: 3, ShutdownTimeout: "20s"},
			Compression:   &config.WALCompression{Type: "zstd", Level: &five}},
			objstore.Options{Prefix: "p/n/s/", MaxEntries: 10000, MaxBytes: 4096, Workers: 3, ShutdownTimeout: 20 * time.Second,
				Compression: objstore.Compression{Codec: objstore.CodecZstd, Level: 5}}},
		{"low latency gzip", config.WALBackend{Prefix: "p", NodeID: "n", StreamID: "s",
			SegmentTuning: &config.WALSegmentTuning{Strategy: "low_latency"},
			Compression:   &config.WALCompression{Type: "gzip"}},
			objstore.Options{Prefix: "p/n/s/", MaxEntries: 100, MaxBytes: 100 << 10, Compression: objstore.Compression{Codec: objstore.CodecGzip}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := objectWALOptions(&tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreUnexported(objstore.Options{}), cmpopts.IgnoreFields(objstore.Options{}, "Bucket", "Logger")); diff != "" {
				t.Fatalf("options (-want +got):\n%s", diff)
			}
		})
	}
}
