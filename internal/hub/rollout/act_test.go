package rollout

import (
	"errors"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
	"github.com/google/go-cmp/cmp"
)

// inState returns a rollout in state whose node a is touched (passed,
// with versions before) unless untouched, b waiting in wave 2.
func inState(state string, untouched bool) Rollout {
	r := New("r1", Plan{Waves: [][]string{{"a"}, {"b"}}, GateTimeout: time.Minute}, t0)
	r.State = state
	if !untouched {
		r.CurrentWave = 1
		r.Nodes[0].Phase, r.Nodes[0].VersionBefore, r.Nodes[0].Generation = passed, "v1", 3
	}
	return r
}

func TestActTransitions(t *testing.T) {
	states := []string{wire.RolloutPending, wire.RolloutRunning, wire.RolloutPaused, wire.RolloutSucceeded,
		wire.RolloutFailed, wire.RolloutCancelled, wire.RolloutRolledBack}
	// table[action][state] is the state the action leads to; absent: ErrAction.
	table := map[string]map[string]string{
		wire.RolloutActionPause:  {wire.RolloutPending: wire.RolloutPaused, wire.RolloutRunning: wire.RolloutPaused},
		wire.RolloutActionResume: {wire.RolloutPaused: wire.RolloutRunning},
		wire.RolloutActionCancel: {wire.RolloutPending: wire.RolloutCancelled, wire.RolloutRunning: wire.RolloutCancelled,
			wire.RolloutPaused: wire.RolloutCancelled},
		wire.RolloutActionRollback: {wire.RolloutRunning: wire.RolloutRolledBack, wire.RolloutPaused: wire.RolloutRolledBack,
			wire.RolloutSucceeded: wire.RolloutRolledBack, wire.RolloutFailed: wire.RolloutRolledBack,
			wire.RolloutCancelled: wire.RolloutRolledBack},
		"restart": {},
		"":        {},
	}
	for action, allowed := range table {
		for _, state := range states {
			t.Run(action+"/"+state, func(t *testing.T) {
				r := inState(state, state == wire.RolloutPending)
				before := clone(r)
				out, effects, err := Act(r, action, nil, sec(9))
				if diff := cmp.Diff(before, r); diff != "" {
					t.Fatalf("Act modified its input:\n%s", diff)
				}
				wantState, ok := allowed[state]
				if !ok {
					if !errors.Is(err, ErrAction) {
						t.Fatalf("err = %v, want ErrAction", err)
					}
					if effects != nil || cmp.Diff(r, out) != "" {
						t.Errorf("a refused action changed the rollout or had effects %v", effects)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if out.State != wantState || !out.UpdatedAt.Equal(sec(9)) {
					t.Fatalf("state %s updated %v, want %s at sec(9)", out.State, out.UpdatedAt, wantState)
				}
				if effects[0].Kind != EffectEvent || effects[0].Data["state"] != wantState || effects[0].Data["rollout_id"] != "r1" {
					t.Errorf("first effect %+v, want the rollout's state event", effects[0])
				}
				terminal := wantState == wire.RolloutCancelled || wantState == wire.RolloutRolledBack
				if terminal != out.FinishedAt.Equal(sec(9)) {
					t.Errorf("FinishedAt = %v", out.FinishedAt)
				}
				for _, e := range effects {
					if e.Kind == EffectApply && !e.Rollback {
						t.Errorf("an action applied the rollout's configuration: %+v", e)
					}
				}
			})
		}
	}
}

func TestActRollbackOfUntouchedRollout(t *testing.T) {
	for _, state := range []string{wire.RolloutPending, wire.RolloutCancelled, wire.RolloutPaused} {
		_, _, err := Act(inState(state, true), wire.RolloutActionRollback, nil, t0)
		if !errors.Is(err, ErrAction) {
			t.Errorf("%s: err = %v, want ErrAction (nothing to roll back)", state, err)
		}
	}
}

func TestActCancel(t *testing.T) {
	r := New("r1", Plan{Waves: [][]string{{"a", "d"}, {"b"}}, GateTimeout: time.Minute}, t0)
	r.State, r.CurrentWave = wire.RolloutRunning, 1
	r.Nodes[0].Phase = applying
	out, effects, err := Act(r, wire.RolloutActionCancel, nil, sec(5))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{applying, skipped, skipped}
	got := []string{out.Nodes[0].Phase, out.Nodes[1].Phase, out.Nodes[2].Phase}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"rollout cancelled", "node d skipped", "node b skipped"}, messages(effects)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if out2, e := Step(out, map[string]Observation{"a": {InSync: true}}, sec(6)); len(e) != 0 || cmp.Diff(out, out2) != "" {
		t.Errorf("a cancelled rollout stepped: %v", messages(e))
	}
}

func TestActRollback(t *testing.T) {
	r := New("r1", Plan{Waves: [][]string{{"a", "b", "e", "s"}, {"c"}}, GateTimeout: time.Minute}, t0)
	r.State, r.CurrentWave, r.Failures = wire.RolloutFailed, 1, 1
	set := func(i int, phase, vb, nvb string) {
		r.Nodes[i].Phase, r.Nodes[i].VersionBefore, r.Nodes[i].NodeVersionBefore, r.Nodes[i].Generation = phase, vb, nvb, 4
		r.Nodes[i].AppliedAt, r.Nodes[i].HealthySince = t0, t0
	}
	set(0, failed, "v1", "v9")
	r.Nodes[0].FailureCode = CodeGateTimeout
	set(1, soaking, "", "v4")
	set(2, applying, "", "")
	r.Nodes[3].Phase = skipped
	out, effects, err := Act(r, wire.RolloutActionRollback, nil, sec(30))
	if err != nil {
		t.Fatal(err)
	}
	wantApplies := []Effect{
		{Kind: EffectApply, NodeID: "a", Rollback: true, Version: "v1", NodeVersion: "v9"},
		{Kind: EffectApply, NodeID: "b", Rollback: true, NodeVersion: "v4"},
	}
	var gotApplies []Effect
	for _, e := range effects {
		if e.Kind == EffectApply {
			gotApplies = append(gotApplies, e)
		}
	}
	if diff := cmp.Diff(wantApplies, gotApplies); diff != "" {
		t.Errorf("applies (-want +got):\n%s", diff)
	}
	wantMsgs := []string{"rollout rolled back", "node a rolling_back", "node b rolling_back",
		"node e failed: rollback_unavailable", "node c skipped"}
	if diff := cmp.Diff(wantMsgs, messages(effects)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	a := out.Nodes[0]
	if a.Phase != rollingBack || a.Generation != 0 || !a.AppliedAt.Equal(sec(30)) || !a.HealthySince.IsZero() || a.FailureCode != CodeGateTimeout {
		t.Errorf("a = %+v, want rolling_back, generation 0, applied at sec(30), its failure kept", a)
	}
	if out.State != wire.RolloutRolledBack || !out.FinishedAt.Equal(sec(30)) || out.Failures != 1 {
		t.Errorf("rollout %s finished %v failures %d", out.State, out.FinishedAt, out.Failures)
	}
	if _, _, err := Act(out, wire.RolloutActionRollback, nil, sec(31)); !errors.Is(err, ErrAction) {
		t.Errorf("second rollback: err = %v, want ErrAction", err)
	}
	// Not judged before the rollback's generation is set.
	obs := map[string]Observation{"a": {InSync: true}, "b": {InSync: true}}
	if _, e := Step(out, obs, sec(32)); len(e) != 0 {
		t.Errorf("rolling back before SetGeneration: %v", messages(e))
	}
	out = SetGeneration(SetGeneration(out, "a", 5), "b", 6)
	out, e := Step(out, obs, sec(33))
	if diff := cmp.Diff([]string{"node a rolled_back", "node b rolled_back"}, messages(e)); diff != "" || out.State != wire.RolloutRolledBack {
		t.Errorf("state %s, events (-want +got):\n%s", out.State, diff)
	}
}
