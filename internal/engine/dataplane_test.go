package engine_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/kernel"
)

var testDataSecret = []byte("0123456789abcdef0123456789abcdef")

// TestSplitHubJobWithoutDataPlane: a Hub job placed split over nodes on an
// engine without a data plane fails to start with ErrNoDataPlane and a
// message saying so; it is held, failed, with its placement visible, until
// the Hub places it again (whole, here) or removes it.
func TestSplitHubJobWithoutDataPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := engine.New(engine.Options{StateDir: t.TempDir(), StopTimeout: 5 * time.Second, NodeID: "a"})
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	spec := materialize(t, countJob("split", t.TempDir(), "5ms", 0, 1)).Jobs[0]
	tasks := map[string]string{"src#0": "a"}
	err := e.StartHubJob(ctx, engine.HubJob{Spec: spec, Generation: 1, TaskNodes: tasks,
		DataAddresses: map[string]string{"a": "127.0.0.1:7000"}, DataSecret: testDataSecret})
	if !errors.Is(err, engine.ErrNoDataPlane) {
		t.Fatalf("StartHubJob = %v, want ErrNoDataPlane", err)
	}
	const want = `job "split" is placed split over nodes but this node has no data plane (health_check.data_port)`
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	st := jobOf(t, e, "split")
	if st.State != kernel.Failed || st.Error != want || !maps.Equal(st.TaskNodes, tasks) {
		t.Errorf("held job: state %s, error %q, task nodes %v", st.State, st.Error, st.TaskNodes)
	}
	if got := e.NotReady(); !slices.Contains(got, "split") {
		t.Errorf("NotReady = %v, want the held split job", got)
	}
	// Placed again whole on this node, it runs.
	if err := e.StartHubJob(ctx, engine.HubJob{Spec: spec, Generation: 2}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the colocated job running", func() bool { return jobOf(t, e, "split").State == kernel.Running })
	if st := jobOf(t, e, "split"); st.TaskNodes != nil {
		t.Errorf("colocated job's task nodes %v", st.TaskNodes)
	}
	if err := e.RemoveHubJob(ctx, "split"); err != nil {
		t.Fatal(err)
	}
}

// engineOnDataPlane is an engine of node "a" with a real data plane on a
// loopback port.
func engineOnDataPlane(t *testing.T) (*engine.Engine, *dataplane.Server) {
	t.Helper()
	dp, err := dataplane.Listen(dataplane.Options{Addr: "127.0.0.1:0", NodeID: "a"})
	if err != nil {
		t.Fatalf("dataplane.Listen: %v", err)
	}
	t.Cleanup(func() { _ = dp.Close() })
	e := engine.New(engine.Options{StateDir: t.TempDir(), StopTimeout: 5 * time.Second, NodeID: "a", DataPlane: dp})
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	return e, dp
}

// splitCountJob is the counting job "split" and its plan.
func splitCountJob(t *testing.T) (*config.Config, *job.Plan) {
	t.Helper()
	cfg := materialize(t, countJob("split", t.TempDir(), "5ms", 0, 1))
	plan, ps := job.Build("jobs[0]", cfg.Jobs[0])
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	return cfg, plan
}

// TestSplitHubJobMesh needs the real data plane (internal/dataplane): a
// split Hub job joins its mesh on the node's data plane for as long as it
// runs; a restart joins it again, a removal leaves it. Every task is
// placed on this node, so the job runs whole over a mesh without peers.
func TestSplitHubJobMesh(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, dp := engineOnDataPlane(t)
	if e.DataPlane() != dp {
		t.Error("DataPlane() is not the engine's data plane")
	}
	cfg, plan := splitCountJob(t)
	tasks := map[string]string{}
	for _, tk := range plan.Tasks {
		tasks[tk.ID] = "a"
	}
	h := engine.HubJob{Spec: cfg.Jobs[0], Generation: 1, TaskNodes: tasks, DataAddresses: map[string]string{"a": dp.Addr()}, DataSecret: testDataSecret}
	joined := func() bool {
		return slices.ContainsFunc(dp.Status().Jobs, func(m dataplane.MeshStatus) bool { return m.Job == "split" })
	}
	if err := e.StartHubJob(ctx, h); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the split job running", func() bool { return jobOf(t, e, "split").State == kernel.Running })
	if !joined() {
		t.Errorf("running split job not in the data plane's status %+v", dp.Status())
	}
	h.Generation = 2
	if err := e.StartHubJob(ctx, h); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the restarted split job running", func() bool { return jobOf(t, e, "split").State == kernel.Running })
	if !joined() {
		t.Errorf("restarted split job not in the data plane's status %+v", dp.Status())
	}
	if err := e.RemoveHubJob(ctx, "split"); err != nil {
		t.Fatal(err)
	}
	if joined() {
		t.Errorf("removed split job still in the data plane's status %+v", dp.Status())
	}
}

// TestSplitHubJobPeerWithoutFingerprint: a split job whose other node has
// no data-plane fingerprint (a node of an earlier release) fails to start
// with ErrSplitPlacement naming the node: links never go without TLS.
func TestSplitHubJobPeerWithoutFingerprint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, dp := engineOnDataPlane(t)
	cfg, plan := splitCountJob(t)
	tasks := map[string]string{}
	for i, tk := range plan.Tasks {
		tasks[tk.ID] = []string{"a", "b"}[i%2]
	}
	h := engine.HubJob{Spec: cfg.Jobs[0], Generation: 1, TaskNodes: tasks,
		DataAddresses:    map[string]string{"a": dp.Addr(), "b": "127.0.0.1:1"},
		DataFingerprints: map[string]string{"a": dp.Fingerprint()}, DataSecret: testDataSecret}
	err := e.StartHubJob(ctx, h)
	if !errors.Is(err, engine.ErrSplitPlacement) || !strings.Contains(err.Error(), "no data-plane certificate fingerprint for nodes b") {
		t.Fatalf("StartHubJob = %v, want ErrSplitPlacement naming node b", err)
	}
	if slices.ContainsFunc(dp.Status().Jobs, func(m dataplane.MeshStatus) bool { return m.Job == "split" }) {
		t.Error("the job joined a mesh with a peer it cannot pin")
	}
}
