package rollout

import (
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
	"github.com/google/go-cmp/cmp"
)

func TestStepStartsFirstWave(t *testing.T) {
	h := newHub(t, Plan{Waves: [][]string{{"a", "b", "d"}, {"c"}}, GateTimeout: time.Minute})
	h.obs["a"] = Observation{Online: true, Mode: "active", CurrentVersion: "v3", CurrentNodeVersion: "v7"}
	h.obs["d"] = Observation{Online: true, Mode: "draining"}
	// b has no observation: offline and active, it gets its apply.
	effects := h.step(t0)

	if h.r.State != wire.RolloutRunning || h.r.CurrentWave != 1 {
		t.Fatalf("state %s wave %d, want running wave 1", h.r.State, h.r.CurrentWave)
	}
	if diff := cmp.Diff([]string{"a", "b"}, applied(effects)); diff != "" {
		t.Errorf("applies (-want +got):\n%s", diff)
	}
	want := map[string]string{"a": applying, "b": applying, "c": waiting, "d": waiting}
	if diff := cmp.Diff(want, h.phases()); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	wantMsgs := []string{"rollout started", "wave 1 started", "node a applying", "node b applying"}
	if diff := cmp.Diff(wantMsgs, messages(effects)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	a := h.node("a")
	if a.VersionBefore != "v3" || a.NodeVersionBefore != "v7" || !a.AppliedAt.Equal(t0) || !a.UpdatedAt.Equal(t0) {
		t.Errorf("node a = %+v, want versions before v3/v7 and applied at t0", a)
	}
	last := effects[len(effects)-1]
	wantData := map[string]any{"rollout_id": "r1", "state": "running", "wave": 1, "node_id": "b", "phase": "applying"}
	if diff := cmp.Diff(wantData, last.Data); diff != "" {
		t.Errorf("event data (-want +got):\n%s", diff)
	}
	if !h.r.UpdatedAt.Equal(t0) {
		t.Errorf("UpdatedAt = %v, want t0", h.r.UpdatedAt)
	}
}

func TestStepGate(t *testing.T) {
	const timeout, soak = 60 * time.Second, 10 * time.Second
	tests := []struct {
		name     string
		phase    string
		gen      int64
		since    time.Time // HealthySince
		soak     time.Duration
		timeout  time.Duration
		obs      Observation
		now      time.Time
		want     string
		wantCode string
	}{
		{name: "in_sync starts the soak", phase: applying, gen: 1, soak: soak, obs: Observation{InSync: true}, now: sec(5), want: soaking},
		{name: "in_sync with soak 0 passes", phase: applying, gen: 1, obs: Observation{InSync: true}, now: sec(5), want: passed},
		{name: "in_sync with a failed stream waits", phase: applying, gen: 1, obs: Observation{InSync: true, StreamFailed: true}, now: sec(5), want: applying},
		{name: "generation unset is not judged", phase: applying, obs: Observation{InSync: true}, now: sec(5), want: applying},
		{name: "generation unset ignores a failed intent", phase: applying, obs: Observation{ApplyFailed: true}, now: sec(5), want: applying},
		{name: "just before the timeout", phase: applying, gen: 1, now: t0.Add(timeout - 1), want: applying},
		{name: "timeout", phase: applying, gen: 1, now: t0.Add(timeout), want: failed, wantCode: CodeGateTimeout},
		{name: "timeout with generation unset", phase: applying, now: t0.Add(timeout), want: failed, wantCode: CodeGateTimeout},
		{name: "healthy at the timeout passes", phase: applying, gen: 1, obs: Observation{InSync: true}, now: t0.Add(timeout), want: passed},
		{name: "no timeout when GateTimeout is 0", phase: applying, gen: 1, timeout: -1, now: sec(100000), want: applying},
		{name: "failed intent", phase: applying, gen: 1, obs: Observation{ApplyFailed: true, FailureCode: "validation_failed", FailureMsg: "bad"}, now: sec(1), want: failed, wantCode: "validation_failed"},
		{name: "failed intent without a code", phase: applying, gen: 1, obs: Observation{ApplyFailed: true}, now: sec(1), want: failed, wantCode: CodeApplyFailed},
		{name: "soaking before its end", phase: soaking, gen: 1, since: sec(5), soak: soak, obs: Observation{InSync: true}, now: sec(14), want: soaking},
		{name: "soaking reaches its end", phase: soaking, gen: 1, since: sec(5), soak: soak, obs: Observation{InSync: true}, now: sec(15), want: passed},
		{name: "soaking past the gate timeout goes on", phase: soaking, gen: 1, since: sec(55), soak: soak, obs: Observation{InSync: true}, now: sec(61), want: soaking},
		{name: "soaking with a failed stream", phase: soaking, gen: 1, since: sec(5), soak: soak, obs: Observation{InSync: true, StreamFailed: true}, now: sec(6), want: failed, wantCode: CodeStreamFailed},
		{name: "soaking leaves in_sync", phase: soaking, gen: 1, since: sec(5), soak: soak, now: sec(6), want: failed, wantCode: CodeOutOfSync},
		{name: "soaking with a failed intent", phase: soaking, gen: 1, since: sec(5), soak: soak, obs: Observation{InSync: true, ApplyFailed: true, FailureCode: "expired"}, now: sec(6), want: failed, wantCode: "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Plan{Waves: [][]string{{"a"}, {"b"}}, GateTimeout: timeout, Soak: tt.soak, MaxFailures: 5}
			if tt.timeout != 0 {
				p.GateTimeout = 0
			}
			r := New("r1", p, t0)
			r.State, r.CurrentWave = wire.RolloutRunning, 1
			r.Nodes[0].Phase, r.Nodes[0].Generation, r.Nodes[0].AppliedAt, r.Nodes[0].HealthySince = tt.phase, tt.gen, t0, tt.since
			out, effects := Step(r, map[string]Observation{"a": tt.obs}, tt.now)
			n := out.Nodes[0]
			if n.Phase != tt.want || n.FailureCode != tt.wantCode {
				t.Fatalf("node a %s (%q), want %s (%q)", n.Phase, n.FailureCode, tt.want, tt.wantCode)
			}
			if tt.want == tt.phase {
				if len(effects) != 0 {
					t.Errorf("effects %v for an unchanged node", effects)
				}
				return
			}
			if !n.UpdatedAt.Equal(tt.now) {
				t.Errorf("UpdatedAt = %v, want now", n.UpdatedAt)
			}
			if tt.want == soaking && !n.HealthySince.Equal(tt.now) {
				t.Errorf("HealthySince = %v, want now", n.HealthySince)
			}
			if tt.want == failed && (out.Failures != 1 || n.FailureMsg == "") {
				t.Errorf("Failures %d, message %q: want 1 and a message", out.Failures, n.FailureMsg)
			}
			if tt.wantCode == "validation_failed" && n.FailureMsg != "bad" {
				t.Errorf("FailureMsg = %q, want the observation's", n.FailureMsg)
			}
		})
	}
}

func TestStepWaveWaitsForGateAndPause(t *testing.T) {
	h := newHub(t, Plan{Waves: [][]string{{"a", "b"}, {"c"}}, GateTimeout: time.Minute, Pause: 30 * time.Second})
	h.step(t0)
	h.set("a", inSync)
	if e := h.step(sec(1)); h.r.CurrentWave != 1 || !h.r.WavePassed.IsZero() {
		t.Fatalf("wave %d passed %v after %v: b still applies", h.r.CurrentWave, h.r.WavePassed, messages(e))
	}
	h.set("b", inSync)
	e := h.step(sec(2))
	if diff := cmp.Diff([]string{"node b passed", "wave 1 passed"}, messages(e)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !h.r.WavePassed.Equal(sec(2)) || h.r.CurrentWave != 1 {
		t.Fatalf("WavePassed %v wave %d, want sec(2) and wave 1", h.r.WavePassed, h.r.CurrentWave)
	}
	if e := h.step(sec(32).Add(-1)); len(e) != 0 {
		t.Fatalf("effects before the pause elapsed: %v", messages(e))
	}
	e = h.step(sec(32))
	if diff := cmp.Diff([]string{"c"}, applied(e)); diff != "" || h.r.CurrentWave != 2 || !h.r.WavePassed.IsZero() {
		t.Fatalf("at the end of the pause: applies %v wave %d WavePassed %v, want c, 2, zero", applied(e), h.r.CurrentWave, h.r.WavePassed)
	}
	h.set("c", inSync)
	e = h.step(sec(33))
	if h.r.State != wire.RolloutSucceeded || !h.r.FinishedAt.Equal(sec(33)) {
		t.Fatalf("state %s finished %v, want succeeded at sec(33)", h.r.State, h.r.FinishedAt)
	}
	if diff := cmp.Diff([]string{"node c passed", "wave 2 passed", "rollout succeeded"}, messages(e)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if e := h.step(sec(40)); len(e) != 0 {
		t.Errorf("a succeeded rollout stepped: %v", messages(e))
	}
}

func TestStepWavesWithoutPauseChain(t *testing.T) {
	// Soak 0, pause 0, and a wave of only drained nodes: one Step passes
	// wave 1, passes wave 2 at once (nothing to wait for) and starts 3.
	h := newHub(t, Plan{Waves: [][]string{{"a"}, {"d"}, {"c"}}, GateTimeout: time.Minute})
	h.obs["d"] = Observation{Mode: "maintenance"}
	h.step(t0)
	h.set("a", inSync)
	e := h.step(sec(1))
	want := []string{"node a passed", "wave 1 passed", "wave 2 started", "wave 2 passed", "wave 3 started", "node c applying"}
	if diff := cmp.Diff(want, messages(e)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestStepBudget(t *testing.T) {
	h := newHub(t, Plan{Waves: [][]string{{"a", "b", "d"}, {"c"}}, GateTimeout: time.Minute, MaxFailures: 1})
	h.obs["d"] = Observation{Mode: "draining"}
	h.step(t0)
	h.set("a", func(o *Observation) { o.ApplyFailed, o.FailureCode = true, "validation_failed" })
	h.step(sec(1))
	if h.r.State != wire.RolloutRunning || h.r.Failures != 1 {
		t.Fatalf("state %s failures %d, want running with 1 failure (within the budget)", h.r.State, h.r.Failures)
	}
	// b, still applying, times out: the second failure exceeds the budget.
	e := h.step(sec(60))
	if h.r.State != wire.RolloutFailed || h.r.FailureCode != CodeBudgetExceeded || !h.r.FinishedAt.Equal(sec(60)) {
		t.Fatalf("state %s code %q finished %v, want failed %s at sec(60)", h.r.State, h.r.FailureCode, h.r.FinishedAt, CodeBudgetExceeded)
	}
	if applied(e) != nil {
		t.Errorf("a failing Step applied %v", applied(e))
	}
	want := map[string]string{"a": failed, "b": failed, "c": skipped, "d": skipped}
	if diff := cmp.Diff(want, h.phases()); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	wantMsgs := []string{"node b failed: gate_timeout", "rollout failed: failure_budget_exceeded", "node d skipped", "node c skipped"}
	if diff := cmp.Diff(wantMsgs, messages(e)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	h.obs["d"] = active1()
	if e := h.step(sec(100)); len(e) != 0 {
		t.Errorf("a failed rollout stepped: %v", messages(e))
	}
}

func TestStepBudgetLeavesApplyingNodes(t *testing.T) {
	h := newHub(t, Plan{Waves: [][]string{{"a", "b"}, {"c"}}, GateTimeout: time.Minute})
	h.step(t0)
	h.set("a", func(o *Observation) { o.ApplyFailed = true })
	h.step(sec(1))
	want := map[string]string{"a": failed, "b": applying, "c": skipped}
	if diff := cmp.Diff(want, h.phases()); diff != "" || h.r.State != wire.RolloutFailed {
		t.Errorf("state %s, phases (-want +got):\n%s", h.r.State, diff)
	}
}

func TestStepWaitingNode(t *testing.T) {
	h := newHub(t, Plan{Waves: [][]string{{"a", "d"}, {"c"}}, GateTimeout: time.Minute})
	h.obs["d"] = Observation{Online: true, Mode: "draining", CurrentVersion: "v1"}
	h.step(t0)
	h.set("a", inSync)
	e := h.step(sec(1))
	if diff := cmp.Diff([]string{"c"}, applied(e)); diff != "" {
		t.Fatalf("a drained node held its wave: applies %v", applied(e))
	}
	h.set("c", inSync)
	h.step(sec(2))
	if h.r.State != wire.RolloutRunning {
		t.Fatalf("state %s with d waiting, want running", h.r.State)
	}
	h.act(wire.RolloutActionPause, sec(3))
	h.obs["d"] = Observation{Online: true, Mode: "active", CurrentVersion: "v2"}
	if e := h.step(sec(4)); len(e) != 0 {
		t.Fatalf("paused rollout stepped: %v", messages(e))
	}
	h.act(wire.RolloutActionResume, sec(5))
	e = h.step(sec(6))
	if diff := cmp.Diff([]string{"d"}, applied(e)); diff != "" {
		t.Fatalf("applies (-want +got):\n%s", diff)
	}
	if d := h.node("d"); d.VersionBefore != "v2" || !d.AppliedAt.Equal(sec(6)) {
		t.Errorf("d = %+v, want version before v2 applied at sec(6)", d)
	}
	if e := h.step(sec(7)); len(e) != 0 {
		t.Errorf("before d's generation is judged: %v", messages(e))
	}
	h.set("d", inSync)
	h.step(sec(8))
	if h.r.State != wire.RolloutSucceeded {
		t.Errorf("state %s, want succeeded", h.r.State)
	}
}

func TestStepPaused(t *testing.T) {
	h := newHub(t, Plan{Waves: [][]string{{"a"}, {"b"}}, GateTimeout: time.Minute})
	h.step(t0)
	h.act(wire.RolloutActionPause, sec(1))
	h.set("a", inSync)
	e := h.step(sec(2))
	if diff := cmp.Diff([]string{"node a passed", "wave 1 passed"}, messages(e)); diff != "" {
		t.Errorf("paused: events (-want +got):\n%s", diff)
	}
	if h.r.State != wire.RolloutPaused || h.r.CurrentWave != 1 {
		t.Fatalf("state %s wave %d, want paused on wave 1", h.r.State, h.r.CurrentWave)
	}
	if e := h.step(sec(100)); len(e) != 0 {
		t.Fatalf("paused rollout moved on: %v", messages(e))
	}
	h.act(wire.RolloutActionResume, sec(101))
	if e := h.step(sec(101)); h.r.CurrentWave != 2 || len(applied(e)) != 1 {
		t.Fatalf("after resume: wave %d applies %v, want wave 2 with b", h.r.CurrentWave, applied(e))
	}
}

func TestStepPausedFailsOverBudget(t *testing.T) {
	h := newHub(t, Plan{Waves: [][]string{{"a"}, {"b"}}, GateTimeout: time.Minute})
	h.step(t0)
	h.act(wire.RolloutActionPause, sec(1))
	h.step(sec(60))
	if h.r.State != wire.RolloutFailed || h.phases()["b"] != skipped {
		t.Errorf("state %s phases %v, want failed with b skipped", h.r.State, h.phases())
	}
}

func TestStepPausedWhilePending(t *testing.T) {
	h := newHub(t, Plan{Waves: [][]string{{"a"}}, GateTimeout: time.Minute})
	h.act(wire.RolloutActionPause, t0)
	if e := h.step(sec(1)); len(e) != 0 || h.r.CurrentWave != 0 {
		t.Fatalf("paused pending rollout stepped: %v", messages(e))
	}
	h.act(wire.RolloutActionResume, sec(2))
	e := h.step(sec(3))
	if diff := cmp.Diff([]string{"wave 1 started", "node a applying"}, messages(e)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestStepRollingBack(t *testing.T) {
	h := newHub(t, Plan{Waves: [][]string{{"a", "b", "c"}}, GateTimeout: time.Minute, MaxFailures: 3})
	for _, id := range []string{"a", "b", "c"} {
		h.obs[id] = Observation{Online: true, Mode: "active", CurrentVersion: "v1", CurrentNodeVersion: "v4"}
	}
	h.step(t0)
	h.act(wire.RolloutActionRollback, sec(1))
	h.obs = map[string]Observation{
		"a": {InSync: true},
		"b": {ApplyFailed: true, FailureCode: "expired", FailureMsg: "intent expired"},
	}
	e := h.step(sec(2))
	want := map[string]string{"a": rolledBack, "b": failed, "c": rollingBack}
	if diff := cmp.Diff(want, h.phases()); diff != "" {
		t.Fatalf("phases (-want +got):\n%s", diff)
	}
	if b := h.node("b"); b.FailureCode != "expired" || b.FailureMsg != "rollback: intent expired" || h.r.Failures != 0 {
		t.Errorf("b = %q %q failures %d, want expired, rollback: intent expired, 0", b.FailureCode, b.FailureMsg, h.r.Failures)
	}
	if len(applied(e)) != 0 || h.r.State != wire.RolloutRolledBack {
		t.Errorf("state %s applies %v", h.r.State, applied(e))
	}
	if e := h.step(sec(3)); len(e) != 0 {
		t.Errorf("unchanged world: %v", messages(e))
	}
}

func TestStepNoWaves(t *testing.T) {
	out, e := Step(New("r1", Plan{}, t0), nil, t0)
	if out.State != wire.RolloutSucceeded || len(applied(e)) != 0 {
		t.Errorf("empty plan: state %s applies %v, want succeeded and none", out.State, applied(e))
	}
}

func TestStepKeepsInput(t *testing.T) {
	r := New("r1", Plan{Waves: [][]string{{"a", "b"}, {"c"}}, GateTimeout: time.Minute}, t0)
	before := clone(r)
	out, _ := Step(r, nil, t0)
	if diff := cmp.Diff(before, r); diff != "" {
		t.Fatalf("Step modified its input (-before +after):\n%s", diff)
	}
	out.Nodes[2].Phase = "x"
	out.Plan.Waves[0][0] = "x"
	if diff := cmp.Diff(before, r); diff != "" {
		t.Fatalf("Step's result shares memory with its input (-before +after):\n%s", diff)
	}
}

func TestSetGeneration(t *testing.T) {
	r := New("r1", Plan{Waves: [][]string{{"a", "b"}}}, t0)
	out := SetGeneration(r, "b", 7)
	if out.Nodes[1].Generation != 7 || out.Nodes[0].Generation != 0 || r.Nodes[1].Generation != 0 {
		t.Errorf("SetGeneration: got %d/%d, input %d", out.Nodes[0].Generation, out.Nodes[1].Generation, r.Nodes[1].Generation)
	}
	if diff := cmp.Diff(r, SetGeneration(r, "zz", 3)); diff != "" {
		t.Errorf("unknown node changed the rollout:\n%s", diff)
	}
}
