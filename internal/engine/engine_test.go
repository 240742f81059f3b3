package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	_ "github.com/flowplane/flowplane/internal/connect/all"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/stream"
	"github.com/flowplane/flowplane/internal/wal"
)

func materialize(t *testing.T, doc string) *config.Config {
	t.Helper()
	cfg, err := config.Materialize([]byte(doc), config.YAML, component.Default, secretref.Resolver{})
	if err != nil {
		t.Fatalf("materialize: %v", err)
	}
	return cfg
}

// waitFor polls cond until it holds; the bound only keeps a broken engine
// from hanging the test, it is not a timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func statusOf(e *engine.Engine, id string) (engine.StreamStatus, bool) {
	for _, s := range e.Streams() {
		if s.ID == id {
			return s, true
		}
	}
	return engine.StreamStatus{}, false
}

func newEngine(t *testing.T) *engine.Engine {
	t.Helper()
	e := engine.New(engine.Options{StateDir: t.TempDir(), StopTimeout: 5 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Shutdown(ctx)
	})
	return e
}

func streamDoc(id, interval string) string {
	return `
  - id: ` + id + `
    input: {type: generate, context: '{"n": {{count}}}', interval: ` + interval + `}
    pipeline: {processors: [{type: json}]}
    output: {type: drop}
`
}

func TestApplyByDiff(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	if err := e.Apply(ctx, materialize(t, "streams:"+streamDoc("a", "5ms")+streamDoc("b", "5ms")+streamDoc("c", "5ms"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three running streams", func() bool { return e.Ready() && len(e.Streams()) == 3 })
	before := map[string]time.Time{}
	for _, s := range e.Streams() {
		before[s.ID] = s.StartedAt
	}
	waitFor(t, "a to receive messages", func() bool { s, _ := statusOf(e, "a"); return s.Received > 0 })

	// a unchanged, b changed, c removed, d added.
	if err := e.Apply(ctx, materialize(t, "streams:"+streamDoc("d", "5ms")+streamDoc("a", "5ms")+streamDoc("b", "7ms"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new configuration to run", e.Ready)
	var ids []string
	for _, s := range e.Streams() {
		ids = append(ids, s.ID)
	}
	if strings.Join(ids, ",") != "d,a,b" {
		t.Errorf("streams after apply = %v, want configuration order d,a,b", ids)
	}
	a, _ := statusOf(e, "a")
	if !a.StartedAt.Equal(before["a"]) || a.Received == 0 {
		t.Errorf("unchanged stream a was restarted (started %v, before %v, received %d)", a.StartedAt, before["a"], a.Received)
	}
	if a.Path != "streams[1]" {
		t.Errorf("a's path = %q, want streams[1]", a.Path)
	}
	b, _ := statusOf(e, "b")
	if b.StartedAt.Equal(before["b"]) {
		t.Error("changed stream b kept its old runtime")
	}
	if _, ok := statusOf(e, "c"); ok {
		t.Error("removed stream c is still configured")
	}
}

func TestStopStartRestart(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	if err := e.Apply(ctx, materialize(t, "streams:"+streamDoc("s", "5ms"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "running", e.Ready)
	if err := e.Stop(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if s, _ := statusOf(e, "s"); s.State != stream.StateStopped {
		t.Errorf("after Stop state = %s", s.State)
	}
	if !e.Ready() || len(e.NotReady()) != 0 {
		t.Errorf("a stream stopped on request makes the engine unready: %v", e.NotReady())
	}
	if err := e.Start(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "running again", e.Ready)
	first, _ := statusOf(e, "s")
	if err := e.Restart(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "running after restart", e.Ready)
	if s, _ := statusOf(e, "s"); s.StartedAt.Equal(first.StartedAt) {
		t.Error("Restart did not start a new runtime")
	}
	for _, op := range []func(context.Context, string) error{e.Stop, e.Start, e.Restart} {
		if err := op(ctx, "nope"); !errors.Is(err, engine.ErrStreamNotFound) {
			t.Errorf("unknown stream: err = %v", err)
		}
	}
}

func TestFiniteStreamsFinish(t *testing.T) {
	e := newEngine(t)
	out := filepath.Join(t.TempDir(), "out.txt")
	doc := `streams:
  - id: f
    input: {type: memory, messages: ['{"a":1}', '{"a":2}', '{"a":3}']}
    pipeline: {thread_num: 2, processors: [{type: json}, {type: filter, condition: 'this.a != 2'}]}
    output: {type: file, path: ` + out + `}
`
	if err := e.Apply(context.Background(), materialize(t, doc)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "completion", e.Finished)
	if f := e.Failed(); len(f) != 0 {
		t.Fatalf("failed streams: %v", f)
	}
	s, _ := statusOf(e, "f")
	if s.State != stream.StateCompleted || s.Received != 3 {
		t.Errorf("status = %+v", s.Status)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "{\"a\":1}\n{\"a\":3}\n" {
		t.Errorf("output = %q", got)
	}
}

func TestDurableStreamUsesStateDir(t *testing.T) {
	dir := t.TempDir()
	e := engine.New(engine.Options{StateDir: dir})
	doc := `streams:
  - id: durable
    input: {type: memory, messages: ['x', 'y']}
    pipeline: {processors: []}
    output: {type: drop}
    durability: {sync: per_entry}
`
	if err := e.Apply(context.Background(), materialize(t, doc)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "completion", e.Finished)
	e.Shutdown(context.Background())
	if _, err := os.Stat(filepath.Join(dir, "wal", "durable")); err != nil {
		t.Errorf("WAL directory: %v", err)
	}
}

func TestUnopenableWALFailsThatStream(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t)
	doc := "streams:" + streamDoc("ok", "5ms") + `
  - id: broken
    input: {type: memory, messages: ['x']}
    pipeline: {processors: []}
    output: {type: drop}
    durability: {path: ` + filepath.Join(blocker, "wal") + `}
`
	err := e.Apply(context.Background(), materialize(t, doc))
	if err == nil || !strings.Contains(err.Error(), "streams[1].durability") {
		t.Fatalf("err = %v, want the broken stream's durability path", err)
	}
	waitFor(t, "the healthy stream to run", func() bool { s, _ := statusOf(e, "ok"); return s.State == stream.StateRunning })
	if s, _ := statusOf(e, "broken"); s.State != stream.StateFailed || s.LastError == "" {
		t.Errorf("broken stream status = %+v", s.Status)
	}
}

func TestCheckReportsBuildProblemsWithPaths(t *testing.T) {
	cfg := materialize(t, `streams:
  - input: {type: generate, context: '{}', count: 1}
    pipeline:
      processors:
        - type: json
        - type: mapping
          expression: 'this.v +* 2'
    output: {type: drop}
`)
	ps := engine.Check(cfg, component.Default)
	if len(ps) != 1 || ps[0].Path != "streams[0].pipeline.processors[1]" {
		t.Fatalf("problems = %v", ps)
	}
	if ps := engine.Check(materialize(t, "streams:"+streamDoc("fine", "1s")), component.Default); len(ps) != 0 {
		t.Errorf("a good configuration has problems: %v", ps)
	}
}

// TestTemporaryTables: a stream's temporary tables are built before its
// processors, which find them by name; their problems, a processor naming
// a table the stream lacks, and two tables of one name are reported with
// paths. Building connects nothing.
func TestTemporaryTables(t *testing.T) {
	stream := func(temporary, table string) string {
		return `streams:
  - input: {type: memory, messages: ['{"u":"a"}']}
    temporary:` + temporary + `
    pipeline:
      processors:
        - {type: enrich, temporary: ` + table + `, key: {type: expr, expr: this.u}}
    output: {type: drop}
`
	}
	redis := func(name, url string) string {
		return `
      - {name: ` + name + `, type: redis, mode: {type: single, url: '` + url + `'}, redis_type: {type: string}, codec: {type: json}}`
	}
	if ps := engine.Check(materialize(t, stream(redis("users", "redis://127.0.0.1:1"), "users")), component.Default); len(ps) != 0 {
		t.Errorf("a good configuration has problems: %v", ps)
	}
	ps := engine.Check(materialize(t, stream(redis("users", "redis://127.0.0.1:1"), "people")), component.Default)
	if len(ps) != 1 || ps[0].Path != "streams[0].pipeline.processors[0]" || !strings.Contains(ps[0].Message, `no temporary table named "people"`) {
		t.Errorf("enrich naming a missing table: %v", ps)
	}
	ps = engine.Check(materialize(t, stream(redis("users", "http://127.0.0.1:1"), "users")), component.Default)
	if len(ps) == 0 || ps[0].Path != "streams[0].temporary[0]" {
		t.Errorf("a table with a bad url: %v", ps)
	}
	_, err := config.Materialize([]byte(stream(redis("users", "redis://127.0.0.1:1")+redis("users", "redis://127.0.0.1:2"), "users")),
		config.YAML, component.Default, secretref.Resolver{})
	if err == nil || !strings.Contains(err.Error(), "streams[0].temporary[1].name") || !strings.Contains(err.Error(), `duplicate temporary name "users"`) {
		t.Errorf("two tables named alike: %v", err)
	}
}

func TestFailedListsOnlyFailedStreams(t *testing.T) {
	e := newEngine(t)
	// A file input on a missing path fails Connect for good, which fails
	// its stream.
	doc := `streams:
  - id: done
    input: {type: memory, messages: ['x']}
    pipeline: {processors: []}
    output: {type: drop}
  - id: broken
    input: {type: file, path: ` + filepath.Join(t.TempDir(), "missing.txt") + `}
    pipeline: {processors: []}
    output: {type: drop}
`
	if err := e.Apply(context.Background(), materialize(t, doc)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both streams to end", e.Finished)
	if got := e.Failed(); len(got) != 1 || got[0] != "broken" {
		t.Errorf("Failed() = %v, want [broken]", got)
	}
}

func TestStoppedStreamIsNotFinished(t *testing.T) {
	e := newEngine(t)
	if err := e.Apply(context.Background(), materialize(t, "streams:"+streamDoc("s", "5ms"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "running", e.Ready)
	if err := e.Stop(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	if e.Finished() {
		t.Error("a stream stopped on request makes the engine finished; the node would exit")
	}
}

// TestStreamsDuringApply reads the streams while Apply removes and changes
// them: every listed stream must have a status (a reader once found an id
// whose instance was already deleted).
func TestStreamsDuringApply(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			if err := e.Apply(ctx, materialize(t, "streams:"+streamDoc("a", "5ms")+streamDoc("b", "5ms"))); err != nil {
				t.Error(err)
				return
			}
			if err := e.Apply(ctx, materialize(t, "streams:"+streamDoc("b", "7ms"))); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
			for _, s := range e.Streams() {
				if s.ID == "" {
					t.Fatal("a listed stream has no status")
				}
			}
		}
	}
}

// TestApplyStoppedNeverStarts: a stream held by ApplyStopped is configured
// and stopped (it never ran: nothing received), is neither failed nor
// finished, stops again without error and starts on request.
func TestApplyStoppedNeverStarts(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	if err := e.ApplyStopped(ctx, materialize(t, "streams:"+streamDoc("held", "1ms")+streamDoc("free", "5ms")), []string{"held"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "free running", func() bool { s, _ := statusOf(e, "free"); return s.State == stream.StateRunning })
	s, ok := statusOf(e, "held")
	if !ok || s.State != stream.StateStopped || s.Received != 0 || s.LastError != "" {
		t.Fatalf("held stream = %+v (found %v)", s, ok)
	}
	if e.Finished() || len(e.Failed()) > 0 {
		t.Errorf("held stream: Finished %v, Failed %v", e.Finished(), e.Failed())
	}
	if err := e.Stop(ctx, "held"); err != nil {
		t.Fatalf("Stop of a held stream: %v", err)
	}
	if err := e.Start(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "held running after Start", func() bool { s, _ := statusOf(e, "held"); return s.State == stream.StateRunning })
}

// TestReadyIsWhatShouldRun: streams stopped on request, held stopped or
// completed keep the engine ready; a stream that failed, or one that was
// stopped and failed to start again, makes it unready and is named.
func TestReadyIsWhatShouldRun(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "missing.txt")
	doc := "streams:" + streamDoc("run", "5ms") + streamDoc("stop", "5ms") + streamDoc("held", "5ms") + `
  - id: done
    input: {type: memory, messages: ['x']}
    pipeline: {processors: []}
    output: {type: drop}
`
	if err := e.ApplyStopped(ctx, materialize(t, doc), []string{"held"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ready", e.Ready)
	if err := e.Stop(ctx, "stop"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "done completed", func() bool { s, _ := statusOf(e, "done"); return s.State == stream.StateCompleted })
	if got := e.NotReady(); len(got) != 0 || !e.Ready() {
		t.Errorf("NotReady() = %v with streams stopped, held and completed, want none", got)
	}
	// A stream that should run and fails makes the engine unready.
	if err := e.Apply(ctx, materialize(t, doc+`
  - id: broken
    input: {type: file, path: `+missing+`}
    pipeline: {processors: []}
    output: {type: drop}
`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "broken failed", func() bool { s, _ := statusOf(e, "broken"); return s.State == stream.StateFailed })
	if got := e.NotReady(); len(got) != 1 || got[0] != "broken" || e.Ready() {
		t.Errorf("NotReady() = %v, want [broken]", got)
	}
}

// TestDurableStreamRestartsAndSharedWALFails: a durable stream's WAL
// directory is released when the stream stops, so Restart and an applied
// change reopen it; two streams given one WAL path cannot both have it,
// and the second fails naming the directory in use.
func TestDurableStreamRestartsAndSharedWALFails(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	durable := func(id, interval, path string) string {
		return streamDoc(id, interval) + "    durability: {path: " + path + "}\n"
	}
	walA, walB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	if err := e.Apply(ctx, materialize(t, "streams:"+durable("a", "5ms", walA))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a running", e.Ready)
	if err := e.Restart(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a running after Restart", e.Ready)
	if err := e.Apply(ctx, materialize(t, "streams:"+durable("a", "7ms", walA))); err != nil {
		t.Fatalf("apply a change to a durable stream: %v", err)
	}
	waitFor(t, "a running after a change", e.Ready)

	err := e.Apply(ctx, materialize(t, "streams:"+durable("a", "7ms", walA)+durable("b", "5ms", walB)+durable("c", "5ms", walA)))
	if !errors.Is(err, wal.ErrInUse) || !strings.Contains(err.Error(), "streams[2].durability") || !strings.Contains(err.Error(), walA) {
		t.Fatalf("a second stream on a's WAL: %v, want streams[2].durability in use naming %s", err, walA)
	}
	waitFor(t, "only c not ready", func() bool { got := e.NotReady(); return len(got) == 1 && got[0] == "c" })
}

// TestChangesEachWatcher: every watcher of Changes is signalled, so the
// node's run loop and another reader never take each other's signal; a
// watcher that stopped is not.
func TestChangesEachWatcher(t *testing.T) {
	e := newEngine(t)
	first, stopFirst := e.Changes()
	defer stopFirst()
	second, stopSecond := e.Changes()
	gone, stopGone := e.Changes()
	stopGone()
	if err := e.Apply(context.Background(), materialize(t, "streams:"+streamDoc("s", "5ms"))); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]<-chan struct{}{"first": first, "second": second} {
		select {
		case <-c:
		case <-time.After(5 * time.Second):
			t.Errorf("the %s watcher was not signalled", name)
		}
	}
	stopSecond()
	select {
	case <-gone:
		t.Error("a watcher that stopped was signalled")
	default:
	}
}
