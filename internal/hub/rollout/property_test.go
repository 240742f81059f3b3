package rollout

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
	"github.com/google/go-cmp/cmp"
)

// TestProperties drives random plans through random worlds (modes,
// observations, time) and random operator actions, and checks the
// issue's invariants after every Step and Act.
func TestProperties(t *testing.T) {
	const runs, steps = 2000, 80
	seen := map[string]int{}
	for run := range runs {
		rng := rand.New(rand.NewPCG(uint64(run), 15))
		sim := newSim(t, rng, fmt.Sprintf("run %d", run))
		for range steps {
			if sim.finished() {
				break
			}
			sim.next()
			if t.Failed() {
				t.Fatalf("%s: plan %+v", sim.name, sim.r.Plan)
			}
		}
		seen[sim.r.State]++
		for k, v := range sim.stats {
			seen[k] += v
		}
	}
	// The runs must reach every outcome and exercise the rules they check,
	// or the invariants above hold vacuously.
	for _, k := range []string{wire.RolloutSucceeded, wire.RolloutFailed, wire.RolloutCancelled, wire.RolloutRolledBack,
		"wave started after a pause", "late apply", "rollback apply", "rollback_unavailable", "paused gate change",
		"rolled_back node", "soak passed"} {
		if seen[k] == 0 {
			t.Errorf("no run reached %q: %v", k, seen)
		}
	}
	t.Logf("outcomes: %v", seen)
}

type sim struct {
	t     *testing.T
	rng   *rand.Rand
	name  string
	r     Rollout
	now   time.Time
	gen   int64
	modes map[string]string
	// What the test saw, independently of the package.
	touched map[string]bool      // got the rollout's apply
	before  map[string][2]string // the observation's versions at that apply
	passAt  map[int]time.Time    // first time a started wave had no node applying or soaking
	stats   map[string]int
	// actionOdds: an operator acts on one step in actionOdds.
	actionOdds int
	afterEnd   int
}

func newSim(t *testing.T, rng *rand.Rand, name string) *sim {
	n := 1 + rng.IntN(9)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%d", i)
	}
	var waves [][]string
	var err error
	if rng.IntN(2) == 0 {
		waves, err = Waves(ids, 1+rng.IntN(4), nil)
	} else {
		pcts := []int{100}
		for p := 90; p > 0; p -= 10 + rng.IntN(40) {
			pcts = append([]int{p}, pcts...)
		}
		waves, err = Waves(ids, 0, pcts)
	}
	if err != nil {
		t.Fatal(err)
	}
	durations := []time.Duration{0, 3 * time.Second, 10 * time.Second}
	p := Plan{
		Waves:       waves,
		GateTimeout: []time.Duration{0, 8 * time.Second, 30 * time.Second}[rng.IntN(3)],
		Soak:        durations[rng.IntN(3)],
		Pause:       durations[rng.IntN(3)],
		MaxFailures: rng.IntN(3),
	}
	s := &sim{t: t, rng: rng, name: name, r: New("r1", p, t0), now: t0, modes: map[string]string{},
		touched: map[string]bool{}, before: map[string][2]string{}, passAt: map[int]time.Time{}, stats: map[string]int{},
		actionOdds: []int{6, 20, 1000}[rng.IntN(3)]}
	for _, id := range ids {
		s.modes[id] = "active"
	}
	return s
}

// finished says whether nothing can change the rollout any more but a
// rollback (tried a few times before giving up on the run).
func (s *sim) finished() bool {
	switch s.r.State {
	case wire.RolloutSucceeded, wire.RolloutFailed, wire.RolloutCancelled:
		s.afterEnd++
		return s.afterEnd > 10
	case wire.RolloutRolledBack:
		return !slices.ContainsFunc(s.r.Nodes, func(n Node) bool { return n.Phase == rollingBack })
	}
	return false
}

func (s *sim) pick(xs ...string) string { return xs[s.rng.IntN(len(xs))] }

// observe makes this step's observations: nodes change modes now and then,
// and their reports are random, weighted towards health.
func (s *sim) observe() map[string]Observation {
	obs := map[string]Observation{}
	for _, n := range s.r.Nodes {
		if s.rng.IntN(8) == 0 {
			s.modes[n.NodeID] = s.pick("active", "active", "draining", "maintenance")
		}
		if s.rng.IntN(10) == 0 {
			continue // offline, nothing observed
		}
		o := Observation{
			Online:             s.rng.IntN(6) != 0,
			Mode:               s.modes[n.NodeID],
			InSync:             s.rng.IntN(10) < 7,
			StreamFailed:       s.rng.IntN(12) == 0,
			CurrentVersion:     s.pick("", "v1", "v2"),
			CurrentNodeVersion: s.pick("", "v5"),
		}
		if s.rng.IntN(25) == 0 {
			o.ApplyFailed = true
			o.FailureCode = s.pick("", "validation_failed", "expired")
		}
		obs[n.NodeID] = o
	}
	return obs
}

func (s *sim) next() {
	s.now = s.now.Add(time.Duration(s.rng.IntN(7)) * time.Second)
	obs := s.observe()
	in := clone(s.r)
	if s.rng.IntN(s.actionOdds) == 0 {
		action := s.pick(wire.RolloutActionPause, wire.RolloutActionPause, wire.RolloutActionResume, wire.RolloutActionResume,
			wire.RolloutActionCancel, wire.RolloutActionRollback, "bogus")
		out, effects, err := Act(s.r, action, obs, s.now)
		if ok, diff := same(in, s.r); !ok {
			s.t.Fatalf("%s: Act modified its input:\n%s", s.name, diff)
		}
		if err != nil {
			if ok, _ := same(in, out); !ok || effects != nil {
				s.t.Errorf("%s: refused %s changed the rollout", s.name, action)
			}
			return
		}
		s.check(in, out, effects, obs, action)
		s.commit(out, effects)
		return
	}
	out, effects := Step(s.r, obs, s.now)
	if ok, diff := same(in, s.r); !ok {
		s.t.Fatalf("%s: Step modified its input:\n%s", s.name, diff)
	}
	out2, effects2 := Step(in, obs, s.now)
	if ok, diff := same(out, out2); !ok || !reflect.DeepEqual(effects, effects2) {
		s.t.Errorf("%s: Step is not deterministic:\n%s", s.name, diff)
	}
	out3, effects3 := Step(out, obs, s.now)
	if ok, diff := same(out, out3); !ok || len(effects3) != 0 {
		s.t.Errorf("%s: Step on an unchanged world changed the rollout (effects %v):\n%s", s.name, messages(effects3), diff)
	}
	s.check(in, out, effects, obs, "")
	s.commit(out, effects)
}

// commit sets generations as the store does; now and then the Hub's
// commit of a generation is left for a later pass (Step must not judge
// such a node).
func (s *sim) commit(r Rollout, effects []Effect) {
	for _, e := range effects {
		if e.Kind == EffectApply {
			s.gen++
			r = SetGeneration(r, e.NodeID, s.gen)
		}
	}
	s.r = r
}

func (s *sim) check(in, out Rollout, effects []Effect, obs map[string]Observation, action string) {
	t, name := s.t, s.name
	t.Helper()
	if len(out.Nodes) != len(in.Nodes) {
		t.Fatalf("%s: %d nodes became %d", name, len(in.Nodes), len(out.Nodes))
	}
	if len(effects) == 0 {
		if ok, diff := same(in, out); !ok {
			t.Errorf("%s: a change without effects:\n%s", name, diff)
		}
	} else if !out.UpdatedAt.Equal(s.now) {
		t.Errorf("%s: UpdatedAt %v, want now", name, out.UpdatedAt)
	}
	if action == "" && !slices.Contains([]string{wire.RolloutPending, wire.RolloutRunning, wire.RolloutPaused, wire.RolloutRolledBack}, in.State) && len(effects) > 0 {
		t.Errorf("%s: Step of a %s rollout had effects %v", name, in.State, messages(effects))
	}
	if out.Failures < in.Failures {
		t.Errorf("%s: Failures went down %d -> %d", name, in.Failures, out.Failures)
	}

	// Exactly one event per node that changed phase (or failure), each
	// naming the node, its wave and new phase; rollout events iff the
	// rollout's state or waves moved.
	index := map[string]int{}
	for i, n := range out.Nodes {
		index[n.NodeID] = i
		if in.Nodes[i].NodeID != n.NodeID || in.Nodes[i].Wave != n.Wave {
			t.Fatalf("%s: node %d changed identity", name, i)
		}
	}
	nodeEvents := map[string]int{}
	rolloutEvents := 0
	for _, e := range effects {
		if e.Kind != EffectEvent {
			continue
		}
		if e.Data["rollout_id"] != "r1" || e.Data["state"] == nil || e.Message == "" {
			t.Errorf("%s: event %+v lacks rollout_id, state or message", name, e)
		}
		id, ok := e.Data["node_id"].(string)
		if !ok {
			rolloutEvents++
			continue
		}
		n := out.Nodes[index[id]]
		nodeEvents[id]++
		if e.Data["phase"] != n.Phase || e.Data["wave"] != n.Wave {
			t.Errorf("%s: event %+v for node %+v", name, e.Data, n)
		}
	}
	for i, n := range out.Nodes {
		was := in.Nodes[i]
		want := 0
		if was.Phase != n.Phase || was.FailureCode != n.FailureCode {
			want = 1
		}
		if nodeEvents[n.NodeID] != want {
			t.Errorf("%s: node %s %s -> %s with %d events", name, n.NodeID, was.Phase, n.Phase, nodeEvents[n.NodeID])
		}
		if !allowedPhase(was.Phase, n.Phase) {
			t.Errorf("%s: node %s moved %s -> %s", name, n.NodeID, was.Phase, n.Phase)
		}
		if in.State == wire.RolloutPaused && action == "" && was.Phase != n.Phase {
			s.stats["paused gate change"]++
		}
		if n.Phase == rolledBack && was.Phase != rolledBack {
			s.stats["rolled_back node"]++
		}
		if n.Phase == passed && was.Phase == soaking {
			s.stats["soak passed"]++
		}
	}
	moved := in.State != out.State || in.CurrentWave != out.CurrentWave || !in.WavePassed.Equal(out.WavePassed)
	if moved != (rolloutEvents > 0) {
		t.Errorf("%s: rollout %s/%d -> %s/%d with %d rollout events", name, in.State, in.CurrentWave, out.State, out.CurrentWave, rolloutEvents)
	}

	// Applies. The rollout's configuration goes out only from a Step of a
	// pending or running rollout that is running after it, to a node that
	// was waiting in a started wave; a rollback only from Act rollback,
	// to exactly the nodes touched, with what they ran before.
	rollbackOf := map[string]bool{}
	for _, e := range effects {
		if e.Kind != EffectApply {
			continue
		}
		i, ok := index[e.NodeID]
		if !ok {
			t.Fatalf("%s: apply for %s, not a target", name, e.NodeID)
		}
		n := out.Nodes[i]
		if e.Rollback {
			rollbackOf[e.NodeID] = true
			if action != wire.RolloutActionRollback {
				t.Errorf("%s: rollback apply of %s outside a rollback (%q)", name, e.NodeID, action)
			}
			if b := s.before[e.NodeID]; e.Version != b[0] || e.NodeVersion != b[1] || b == ([2]string{}) {
				t.Errorf("%s: rollback of %s to %q/%q, it ran %q/%q before", name, e.NodeID, e.Version, e.NodeVersion, b[0], b[1])
			}
			s.stats["rollback apply"]++
			continue
		}
		if action != "" || (in.State != wire.RolloutPending && in.State != wire.RolloutRunning) || out.State != wire.RolloutRunning {
			t.Errorf("%s: apply of %s by %q from %s to %s", name, e.NodeID, action, in.State, out.State)
		}
		if in.Nodes[i].Phase != waiting || n.Phase != applying || n.Wave > out.CurrentWave || s.touched[e.NodeID] {
			t.Errorf("%s: apply of %s (%s -> %s, wave %d of %d, touched before %v)", name, e.NodeID, in.Nodes[i].Phase, n.Phase, n.Wave, out.CurrentWave, s.touched[e.NodeID])
		}
		o := obs[e.NodeID]
		if o.Mode == "draining" || o.Mode == "maintenance" {
			t.Errorf("%s: apply of %s in %s", name, e.NodeID, o.Mode)
		}
		if n.VersionBefore != o.CurrentVersion || n.NodeVersionBefore != o.CurrentNodeVersion {
			t.Errorf("%s: %s versions before %q/%q, observed %q/%q", name, e.NodeID, n.VersionBefore, n.NodeVersionBefore, o.CurrentVersion, o.CurrentNodeVersion)
		}
		if n.Wave < out.CurrentWave || (n.Wave == in.CurrentWave && in.State != wire.RolloutPending) {
			s.stats["late apply"]++
		}
		s.touched[e.NodeID] = true
		s.before[e.NodeID] = [2]string{o.CurrentVersion, o.CurrentNodeVersion}
	}
	if action == wire.RolloutActionRollback {
		for _, n := range out.Nodes {
			unavailable := n.Phase == failed && n.FailureCode == CodeRollbackUnavailable
			if unavailable {
				s.stats["rollback_unavailable"]++
			}
			if s.touched[n.NodeID] != (rollbackOf[n.NodeID] || unavailable) {
				t.Errorf("%s: rollback: node %s touched %v, rolled back %v, unavailable %v", name, n.NodeID, s.touched[n.NodeID], rollbackOf[n.NodeID], unavailable)
			}
			if !s.touched[n.NodeID] && n.Phase != skipped {
				t.Errorf("%s: rollback left untouched %s %s", name, n.NodeID, n.Phase)
			}
		}
	}

	// Waves: record when each started wave first had nothing applying or
	// soaking; a wave starts only after the previous one did, plus Pause,
	// from a Step of a pending or running rollout.
	for k := 1; k <= out.CurrentWave; k++ {
		if _, ok := s.passAt[k]; ok {
			continue
		}
		done := true
		for _, n := range out.Nodes {
			if n.Wave == k && (n.Phase == applying || n.Phase == soaking) {
				done = false
			}
		}
		if done {
			s.passAt[k] = s.now
		}
	}
	if out.CurrentWave < in.CurrentWave {
		t.Errorf("%s: wave went back %d -> %d", name, in.CurrentWave, out.CurrentWave)
	}
	for k := in.CurrentWave + 1; k <= out.CurrentWave; k++ {
		if action != "" || (in.State != wire.RolloutPending && in.State != wire.RolloutRunning) {
			t.Errorf("%s: wave %d started by %q from %s", name, k, action, in.State)
		}
		if k == 1 {
			continue
		}
		at, ok := s.passAt[k-1]
		if !ok || s.now.Before(at.Add(out.Plan.Pause)) {
			t.Errorf("%s: wave %d started at %v; wave %d passed %v (%v), pause %v", name, k, s.now.Sub(t0), k-1, at.Sub(t0), ok, out.Plan.Pause)
		}
		if out.Plan.Pause > 0 {
			s.stats["wave started after a pause"]++
		}
	}

	// Outcomes.
	if out.State != in.State {
		switch out.State {
		case wire.RolloutFailed:
			if out.Failures <= out.Plan.MaxFailures || out.FailureCode != CodeBudgetExceeded {
				t.Errorf("%s: failed with %d failures, budget %d, code %q", name, out.Failures, out.Plan.MaxFailures, out.FailureCode)
			}
			for _, n := range out.Nodes {
				if n.Wave > out.CurrentWave && (n.Phase != skipped || s.touched[n.NodeID]) {
					t.Errorf("%s: failed on wave %d, node %s of wave %d %s", name, out.CurrentWave, n.NodeID, n.Wave, n.Phase)
				}
			}
		case wire.RolloutSucceeded:
			for _, n := range out.Nodes {
				if n.Phase != passed && n.Phase != failed {
					t.Errorf("%s: succeeded with %s %s", name, n.NodeID, n.Phase)
				}
			}
			if out.Failures > out.Plan.MaxFailures {
				t.Errorf("%s: succeeded with %d failures, budget %d", name, out.Failures, out.Plan.MaxFailures)
			}
		}
		terminal := slices.Contains([]string{wire.RolloutSucceeded, wire.RolloutFailed, wire.RolloutCancelled, wire.RolloutRolledBack}, out.State)
		if terminal && !out.FinishedAt.Equal(s.now) {
			t.Errorf("%s: %s with FinishedAt %v", name, out.State, out.FinishedAt)
		}
	}
	if out.State != wire.RolloutRolledBack {
		count := 0
		for _, n := range out.Nodes {
			if n.Phase == failed {
				count++
			}
		}
		if count != out.Failures {
			t.Errorf("%s: %d nodes failed, Failures %d", name, count, out.Failures)
		}
	}
}

// same compares rollouts cheaply (times are built alike from t0, so
// reflect.DeepEqual agrees with cmp here), and diffs them only when they
// differ: cmp.Diff on every step would dominate the test's time.
func same(a, b Rollout) (bool, string) {
	if reflect.DeepEqual(a, b) {
		return true, ""
	}
	return false, cmp.Diff(a, b)
}

// allowedPhase says whether a node may move from phase a to b in one Step
// or Act.
func allowedPhase(a, b string) bool {
	if a == b {
		return true
	}
	next := map[string][]string{
		waiting:     {applying, skipped},
		applying:    {soaking, passed, failed, rollingBack},
		soaking:     {passed, failed, rollingBack},
		passed:      {rollingBack, failed},
		failed:      {rollingBack},
		rollingBack: {rolledBack, failed},
	}
	return slices.Contains(next[a], b)
}
