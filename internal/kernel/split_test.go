package kernel_test

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/kernel"
)

// countJob is generate (p=2) -> partitioned keyed aggregate (p=2) -> file
// sink (chained), checkpointed every intervalMs to a file:// store.
func countJob(t *testing.T, id string, n int, outDir, store string, intervalMs int) (config.Job, *job.Plan) {
	t.Helper()
	spec := config.Job{
		ID: id, Version: 1, Parallelism: 2, MaxParallelism: 64,
		Operators: []config.Operator{
			{ID: "src", Kind: "source"},
			{ID: "agg", Kind: "aggregate", Config: map[string]any{
				"key": "int(this.id) % 7", "aggregations": []any{map[string]any{"name": "n", "function": "count"}},
			}},
			{ID: "out", Kind: "sink"},
		},
		Edges: []config.Edge{{From: "src", To: "agg", Partitioned: true}, {From: "agg", To: "out"}},
		Sources: []config.Source{{OperatorID: "src", InputType: "generate", Config: map[string]any{
			"context": `{"id": {{count}}}`, "interval": "1ms", "count": n, "batch_size": 5,
		}}},
		Sinks: []config.Sink{{OperatorID: "out", OutputType: "file", Config: map[string]any{
			"path": filepath.Join(outDir, "counts.jsonl"), "append_newline": true,
		}}},
		State:      &config.JobState{Backend: "embedded_kv", Durability: "durable", FormatVersion: 1, MaxPendingTransactions: 64},
		Checkpoint: &config.Checkpoint{IntervalMs: intervalMs, Retention: 2, ObjectStoreURI: "file://" + store},
		Recovery:   "latest_checkpoint",
	}
	p, probs := job.Build("jobs[0]", spec)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return spec, p
}

// splitNode is one node of a split job: its data plane and the job's run
// on it.
type splitNode struct {
	id    string
	srv   *dataplane.Server
	state string
}

// newSplitNode starts node id's data plane on addr with identity key (nil:
// a new one; a restarted node keeps its own).
func newSplitNode(t *testing.T, id, addr string, key *dataplane.Identity) *splitNode {
	t.Helper()
	srv, err := dataplane.Listen(dataplane.Options{Addr: addr, NodeID: id, HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Second, Identity: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &splitNode{id: id, srv: srv, state: t.TempDir()}
}

// start builds and runs node's share of the job; the returned channel
// gets Run's result.
func (n *splitNode) start(t *testing.T, ctx context.Context, spec config.Job, p *job.Plan, secret []byte, taskNodes map[string]string, addrs map[string]dataplane.Peer) (*kernel.Job, <-chan error) {
	t.Helper()
	mesh, err := n.srv.Join(p.JobID, secret, addrs)
	if err != nil {
		t.Fatal(err)
	}
	j, err := kernel.Build("jobs[0]", p, kernel.Options{
		Registry: component.Default, Spec: &spec, StateRoot: n.state, FenceGeneration: 1,
		Split: &kernel.Split{Self: n.id, TaskNodes: taskNodes, Mesh: mesh},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- j.Run(ctx)
		j.Close()
		mesh.Close()
	}()
	return j, done
}

func wait(t *testing.T, what string, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not end", what)
		return nil
	}
}

// TestSplitJobExactlyOnce runs one job on two nodes joined by the data
// plane: node a coordinates (it runs the plan's first task), node b
// follows. Halfway, b's run is killed and a new one joins with a new data
// plane on the same address: the job recovers from the newest checkpoint
// on both nodes and every count is committed exactly once.
func TestSplitJobExactlyOnce(t *testing.T) {
	const n, keys = 4000, 7
	outDir, store := t.TempDir(), t.TempDir()
	spec, p := countJob(t, "split", n, outDir, store, 30)
	secret := make([]byte, 32)
	rand.Read(secret)
	keyB, err := dataplane.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	a := newSplitNode(t, "a", "127.0.0.1:0", nil)
	b := newSplitNode(t, "b", "127.0.0.1:0", keyB)
	addrs := map[string]dataplane.Peer{"a": {Addr: a.srv.Addr(), Fingerprint: a.srv.Fingerprint()}, "b": {Addr: b.srv.Addr(), Fingerprint: b.srv.Fingerprint()}}
	taskNodes := map[string]string{}
	for _, task := range p.Tasks {
		taskNodes[task.ID] = []string{"a", "b"}[task.Subtask]
	}
	if c := p.Coordinator(taskNodes); c != "a" {
		t.Fatalf("coordinator %q", c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	leader, leaderDone := a.start(t, ctx, spec, p, secret, taskNodes, addrs)
	bctx, killB := context.WithCancel(ctx)
	_, bDone := b.start(t, bctx, spec, p, secret, taskNodes, addrs)

	for leader.Observe().LastCheckpoint < 4 {
		if ctx.Err() != nil {
			t.Fatal("no checkpoints across the two nodes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	killB()
	if err := wait(t, "b", bDone); err != nil {
		t.Fatal(err)
	}
	// The coordinator notices and waits for b.
	for leader.Observe().State != kernel.Recovering && leader.Observe().State != kernel.Starting {
		if ctx.Err() != nil {
			t.Fatalf("the coordinator did not notice: %+v", leader.Observe())
		}
		time.Sleep(5 * time.Millisecond)
	}
	addr := b.srv.Addr()
	b.srv.Close()
	b2 := newSplitNode(t, "b", addr, keyB)
	_, b2Done := b2.start(t, ctx, spec, p, secret, taskNodes, addrs)
	if err := wait(t, "the coordinator", leaderDone); err != nil {
		t.Fatal(err)
	}
	if o := leader.Observe(); o.State != kernel.Completed || o.Restarts == 0 {
		t.Fatalf("coordinator: %+v", o)
	}
	if err := wait(t, "b", b2Done); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, outDir, n, keys)
}

// TestSplitFollowerRefusesCheckpoints: only the coordinator takes them.
func TestSplitFollowerRefusesCheckpoints(t *testing.T) {
	spec, p := countJob(t, "split", 10, t.TempDir(), t.TempDir(), 30)
	b := newSplitNode(t, "b", "127.0.0.1:0", nil)
	taskNodes := map[string]string{}
	for _, task := range p.Tasks {
		taskNodes[task.ID] = []string{"a", "b"}[task.Subtask]
	}
	mesh, err := b.srv.Join(p.JobID, []byte("0123456789abcdef0123456789abcdef"), map[string]dataplane.Peer{"a": {Addr: "127.0.0.1:1", Fingerprint: dataplane.FingerprintOf([]byte("a"))}})
	if err != nil {
		t.Fatal(err)
	}
	defer mesh.Close()
	j, err := kernel.Build("jobs[0]", p, kernel.Options{Registry: component.Default, Spec: &spec, StateRoot: b.state,
		Split: &kernel.Split{Self: "b", TaskNodes: taskNodes, Mesh: mesh}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Checkpoint(context.Background()); err != kernel.ErrNotCoordinator {
		t.Fatalf("checkpoint on a follower: %v", err)
	}
	for name, nodes := range map[string]map[string]string{
		"missing task": {p.Tasks[0].ID: "a"},
		"none here": func() map[string]string {
			m := map[string]string{}
			for _, t := range p.Tasks {
				m[t.ID] = "a"
			}
			return m
		}(),
	} {
		_, err := kernel.Build("jobs[0]", p, kernel.Options{Registry: component.Default, Spec: &spec, StateRoot: b.state,
			Split: &kernel.Split{Self: "b", TaskNodes: nodes, Mesh: mesh}})
		if err == nil {
			t.Errorf("%s: built", name)
		}
	}
}

// TestSplitOneNodeCompletes: a split job whose tasks all land on one node
// (placement split over one node, or the survivor of a move) has no
// follower to report done; its coordinator completes once its own tasks
// finish, with every count committed exactly once.
func TestSplitOneNodeCompletes(t *testing.T) {
	const n, keys = 500, 7
	outDir, store := t.TempDir(), t.TempDir()
	spec, p := countJob(t, "split-one", n, outDir, store, 30)
	secret := make([]byte, 32)
	rand.Read(secret)
	a := newSplitNode(t, "a", "127.0.0.1:0", nil)
	taskNodes := map[string]string{}
	for _, task := range p.Tasks {
		taskNodes[task.ID] = "a"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	j, done := a.start(t, ctx, spec, p, secret, taskNodes, map[string]dataplane.Peer{"a": {Addr: a.srv.Addr(), Fingerprint: a.srv.Fingerprint()}})
	if err := wait(t, "the single-node split job", done); err != nil {
		t.Fatal(err)
	}
	if o := j.Observe(); o.State != kernel.Completed {
		t.Fatalf("single-node split job ended %s, want completed: %+v", o.State, o)
	}
	checkExactlyOnce(t, outDir, n, keys)
}
