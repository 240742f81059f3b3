package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flowplane/flowplane/internal/agent"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	_ "github.com/flowplane/flowplane/internal/connect/all"
	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/eventlog"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/node/history"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/wire"
)

const (
	testNodeToken = "node-token-s3cr3t-0123456789"
	testNodeID    = "node-a"
)

// genStream keeps running: a generate input every 10ms into drop.
func genStream(id string) string {
	return fmt.Sprintf(`  - id: %s
    input: {type: generate, context: '{"s": "%s"}', interval: 10ms, batch_size: 1}
    pipeline: {processors: []}
    output: {type: drop}
`, id, id)
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testNode is one node process as cmd/flowplane builds a Hub-managed one:
// engine, node, Agent over a state directory.
type testNode struct {
	n      *node.Node
	eng    *engine.Engine
	events *eventlog.Log
	agent  *agent.Agent
	dp     *engine.DataPlane // nil without nodeOptions.dataPlane
	logs   *syncBuffer
	stop   func() // stops the Agent, then the engine (idempotent)
}

type nodeOptions struct {
	stateDir string
	hubURLs  []string
	streams  []string // stream ids, each a genStream
	extra    string   // more streams, as YAML list items
	jobs     bool     // the Agent runs Hub jobs on the engine
	// dataPlane gives the engine a data plane on 127.0.0.1:0, whose
	// address the Agent advertises (needs the real internal/dataplane).
	dataPlane bool
	tune      func(*agent.Options)
}

func startNode(t testing.TB, o nodeOptions) *testNode {
	t.Helper()
	reg := component.Default
	var streams strings.Builder
	for _, id := range o.streams {
		streams.WriteString(genStream(id))
	}
	streams.WriteString(o.extra)
	text := "logging: {level: error}\nhealth_check: {enabled: false}\nstreams:\n" + streams.String()
	if streams.Len() == 0 {
		text = "logging: {level: error}\nhealth_check: {enabled: false}\nstreams: []\n"
	}
	hist, err := history.Open(filepath.Join(o.stateDir, "config"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	version, _, err := hist.Boot([]byte(text), config.YAML, "node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Materialize(version.Content, version.Format, reg, secretref.Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	events := eventlog.New(eventlog.Options{})
	tn := &testNode{events: events, logs: logs}
	var nd atomic.Pointer[node.Node]
	if o.dataPlane {
		dp, err := dataplane.Listen(dataplane.Options{Addr: "127.0.0.1:0", NodeID: testNodeID, Logger: log})
		if err != nil {
			t.Fatalf("dataplane.Listen: %v", err)
		}
		tn.dp = dp
	}
	eng := engine.New(engine.Options{Registry: reg, StateDir: o.stateDir, StopTimeout: 5 * time.Second, NodeID: testNodeID, DataPlane: tn.dp, OnState: func(id string, st engine.StreamState) {
		if n := nd.Load(); n != nil {
			n.OnStreamState(id, st)
		}
	}})
	bootID := uuid.Must(uuid.NewV7()).String()
	n := node.New(node.Options{Engine: eng, Registry: reg, Events: events, NodeID: testNodeID, BootID: bootID, Version: "test"}, cfg, version.ID)
	n.AttachHistory(hist, secretref.Resolver{}, cfg)
	nd.Store(n)
	tn.n, tn.eng = n, eng
	ao := agent.Options{
		HubURLs: o.hubURLs, NodeToken: testNodeToken, NodeID: testNodeID, BootID: bootID, Version: "test",
		LeaseTTL: 15 * time.Second, SessionTTL: time.Hour, StateDir: o.stateDir, Node: n, Events: events, Logger: log,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, PollWait: 2 * time.Second,
		RequestTimeout: 2 * time.Second,
	}
	if o.jobs {
		ao.Engine, ao.Registry, ao.Resolver = eng, reg, secretref.Resolver{}
	}
	if tn.dp != nil {
		ao.DataAddress = tn.dp.Addr()
	}
	if o.tune != nil {
		o.tune(&ao)
	}
	a, err := agent.New(ao)
	if err != nil {
		t.Fatal(err)
	}
	tn.agent = a
	if err := eng.ApplyStopped(context.Background(), cfg, a.Stopped()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	tn.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(waitFor):
				t.Errorf("Agent.Run did not return after its context ended")
			}
			sctx, scancel := context.WithTimeout(context.Background(), waitFor)
			defer scancel()
			eng.Shutdown(sctx)
			if tn.dp != nil {
				if err := tn.dp.Close(); err != nil {
					t.Errorf("close the data plane: %v", err)
				}
			}
			if strings.Contains(logs.String(), testNodeToken) {
				t.Errorf("the node token is in the logs")
			}
		})
	}
	t.Cleanup(tn.stop)
	return tn
}

// stream returns one stream's node view.
func (tn *testNode) stream(t *testing.T, id string) wire.Stream {
	t.Helper()
	s, err := tn.n.Stream(id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hubEvents returns the node's events with actor hub and a correlation id.
func (tn *testNode) hubEvents(kind, correlationID string) []wire.Event {
	page := tn.events.Query(eventlog.Filter{}, 1, 100)
	var out []wire.Event
	for _, ev := range page.Items {
		if ev.Kind == kind && ev.Actor == "hub" && ev.CorrelationID == correlationID {
			out = append(out, ev)
		}
	}
	return out
}

// eventually polls cond every 5ms until it holds; the bound only keeps a
// broken Agent from hanging the test.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
