package hub

import (
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestStatusJobs: GET /status counts the jobs by desired state, observed
// state and convergence, for the console's overview.
func TestStatusJobs(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	a := newJobAgent(t, th, "n1")
	th.op(t, "POST", "/jobs", `{"spec": `+testJobSpec("j1", 1, 128)+`, "desired_state": "stopped"}`, http.StatusAccepted)
	a.runAll(t)
	th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	th.op(t, "POST", "/jobs", `{"spec": `+testJobSpec("j2", 1, 128)+`, "desired_state": "running"}`, http.StatusAccepted)
	st := decode[Status](t, th.do(t, "GET", APIPrefix+"/status", "", bearer...))
	j := st.Jobs
	if j.Total != 2 || !maps.Equal(j.Desired, map[string]int{"stopped": 1, "running": 1}) || j.Observed[wire.JobStopped] != 1 ||
		j.Observed[wire.JobStopped]+j.Observed[wire.TaskNotObserved]+j.Observed[wire.JobRunning] != 2 ||
		j.Convergence[wire.ConvergenceInSync] != 1 || j.Convergence[wire.ConvergenceInSync]+j.Convergence[wire.ConvergencePending]+j.Convergence[wire.ConvergenceApplying] != 2 {
		t.Fatalf("jobs in /status: %+v", j)
	}
}

// TestCheckpointsPruned: completed checkpoints past the spec's
// checkpoint.retention (3 by default) are listed pruned, not completed:
// their node deleted them.
func TestCheckpointsPruned(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	a := newJobAgent(t, th, "n1")
	th.op(t, "POST", "/jobs", `{"spec": `+testJobSpec("j1", 1, 128)+`, "desired_state": "running"}`, http.StatusAccepted)
	a.runAll(t)
	th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	for i := range 5 {
		th.op(t, "POST", "/jobs/j1/checkpoints", "", http.StatusAccepted)
		a.runAll(t)
		eventually(t, "checkpoint completed", func() bool {
			arts := decode[wire.Page[wire.JobArtifact]](t, th.op(t, "GET", "/jobs/j1/checkpoints?page_size=50", "", http.StatusOK))
			return len(arts.Items) == i+1 && arts.Items[0].State != wire.ArtifactPending
		})
	}
	arts := decode[wire.Page[wire.JobArtifact]](t, th.op(t, "GET", "/jobs/j1/checkpoints?page_size=50", "", http.StatusOK))
	var states []string
	for _, x := range arts.Items {
		states = append(states, x.State)
	}
	want := []string{"completed", "completed", "completed", "pruned", "pruned"}
	if len(states) != len(want) || !slices.Equal(states, want) || arts.Items[0].ID < arts.Items[4].ID {
		t.Fatalf("checkpoint states newest first %v, want %v", states, want)
	}
	if c := decode[wire.Page[wire.JobArtifact]](t, th.op(t, "GET", "/jobs/j1/checkpoints?state=completed", "", http.StatusOK)); c.Total != 3 {
		t.Fatalf("?state=completed lists %d, want the 3 kept", c.Total)
	}
}
