package reconcile

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

var (
	opStates   = []string{wire.OpPending, wire.OpDispatched, wire.OpAcknowledged, wire.OpSucceeded, wire.OpFailed, wire.OpTimedOut, wire.OpCancelled, wire.OpSuperseded}
	statuses   = []string{StatusOnline, StatusUnavailable, StatusUnknown}
	modes      = []string{wire.NodeModeActive, wire.NodeModeDraining, wire.NodeModeMaintenance}
	codes      = []string{"", CodeCapacity, CodeExpired, CodeIncompatibleCapability, CodeNodeUnavailable, "engine_error"}
	caps       = []string{"network_shuffle", "data_address"}
	convValues = []string{wire.ConvergenceUnknown, wire.ConvergencePending, wire.ConvergenceApplying, wire.ConvergenceInSync, wire.ConvergenceDegraded, wire.ConvergenceBlocked}
)

func genNode(t *rapid.T, label string) Node {
	return Node{
		// Weighted towards online and active, so that rows compete for queues.
		Status:       rapid.SampledFrom(append([]string{StatusOnline, StatusOnline}, statuses...)).Draw(t, label+".status"),
		Mode:         rapid.SampledFrom(append([]string{wire.NodeModeActive, wire.NodeModeActive}, modes...)).Draw(t, label+".mode"),
		Capabilities: rapid.SliceOfNDistinct(rapid.SampledFrom(caps), 0, 2, rapid.ID[string]).Draw(t, label+".caps"),
		Active:       rapid.IntRange(0, 2).Draw(t, label+".active"),
		Fresh:        rapid.Bool().Draw(t, label+".fresh"),
	}
}

func genObserved(t *rapid.T) *Observed {
	if rapid.Bool().Draw(t, "observed.absent") {
		return nil
	}
	o := &Observed{
		State:         rapid.SampledFrom([]string{"starting", "running", "stopping", "stopped", "completed", "failed"}).Draw(t, "observed.state"),
		Generation:    rapid.Int64Range(0, 4).Draw(t, "observed.generation"),
		ConfigVersion: rapid.SampledFrom([]string{"v1", "v2"}).Draw(t, "observed.config"),
		ActionID:      rapid.SampledFrom([]string{"", "a1", "a2"}).Draw(t, "observed.action"),
	}
	if rapid.Bool().Draw(t, "observed.erroring") {
		o.LastError = "boom"
		o.LastErrorAt = t0.Add(-time.Duration(rapid.IntRange(0, 120).Draw(t, "observed.errorAge")) * time.Second)
	}
	return o
}

func genConvergence(t *rapid.T) ConvergenceInput {
	in := ConvergenceInput{
		Node:                 genNode(t, "node"),
		Observed:             genObserved(t),
		RequiredCapabilities: rapid.SliceOfNDistinct(rapid.SampledFrom(caps), 0, 2, rapid.ID[string]).Draw(t, "required"),
		ErrorWindow:          time.Duration(rapid.IntRange(0, 60).Draw(t, "window")) * time.Second,
		Now:                  t0,
	}
	if !rapid.Bool().Draw(t, "desired.absent") {
		in.Desired = &Desired{
			State:         rapid.SampledFrom([]string{"running", "stopped"}).Draw(t, "desired.state"),
			Generation:    rapid.Int64Range(1, 4).Draw(t, "desired.generation"),
			ConfigVersion: rapid.SampledFrom([]string{"v1", "v2"}).Draw(t, "desired.config"),
			ActionID:      rapid.SampledFrom([]string{"", "a1", "a2"}).Draw(t, "desired.action"),
		}
	}
	if !rapid.Bool().Draw(t, "attempt.absent") {
		in.Latest = &LatestAttempt{
			State:         rapid.SampledFrom(opStates).Draw(t, "attempt.state"),
			FailureCode:   rapid.SampledFrom(codes).Draw(t, "attempt.code"),
			RetryPending:  rapid.Bool().Draw(t, "attempt.retry"),
			IntentExpired: rapid.Bool().Draw(t, "attempt.expired"),
		}
	}
	return in
}

// matching returns an observation that matches d exactly, without error.
func matching(d Desired) *Observed {
	return &Observed{State: d.State, Generation: d.Generation, ConfigVersion: d.ConfigVersion, ActionID: d.ActionID}
}

// Convergence always answers one of the six values, with a reason.
func TestPropConvergenceTotal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := Convergence(genConvergence(t))
		if !slices.Contains(convValues, r.Value) || r.Reason == "" {
			t.Fatalf("Convergence = %+v", r)
		}
	})
}

// (a) Acknowledgement alone never yields in_sync: with no matching
// observation, an acknowledged attempt is never in_sync.
func TestPropAcknowledgementNeverInSync(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genConvergence(t)
		ack := wire.OpAcknowledged
		if rapid.Bool().Draw(t, "succeeded") {
			ack = wire.OpSucceeded // a success result is transport too
		}
		in.Latest = &LatestAttempt{State: ack, RetryPending: rapid.Bool().Draw(t, "retry")}
		if in.Desired != nil && in.Observed != nil && matches(*in.Desired, *in.Observed) {
			in.Observed = nil
		}
		if r := Convergence(in); r.Value == wire.ConvergenceInSync {
			t.Fatalf("Convergence = %+v without a matching observation", r)
		}
	})
}

// (b) A matching, error-free observation from a node that is online and has
// reported since the Hub started yields in_sync whatever the node's mode and
// the attempt's transport state.
func TestPropMatchingObservationInSync(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genConvergence(t)
		if in.Desired == nil {
			in.Desired = &Desired{State: "running", Generation: 1, ConfigVersion: "v1"}
		}
		in.Node.Status, in.Node.Fresh = StatusOnline, true
		in.Observed = matching(*in.Desired)
		if r := Convergence(in); r.Value != wire.ConvergenceInSync {
			t.Fatalf("Convergence = %+v with a matching observation", r)
		}
	})
}

// (b') Convergence never claims what no one observed: when the node is not
// online, or has not reported since the Hub started or since it came back,
// its stored observation adds nothing but the word stale. The result is the
// one without any observation, or unknown/stale; so never in_sync, and never
// degraded because of what the observation said.
func TestPropStaleObservationNeverJudged(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genConvergence(t)
		if rapid.Bool().Draw(t, "offline") {
			in.Node.Status = rapid.SampledFrom([]string{StatusUnavailable, StatusUnknown}).Draw(t, "stale.status")
		} else {
			in.Node.Status, in.Node.Fresh = StatusOnline, false
		}
		if in.Observed == nil || rapid.Bool().Draw(t, "match") && in.Desired != nil {
			d := Desired{State: "running", Generation: 2, ConfigVersion: "v1"}
			if in.Desired != nil {
				d = *in.Desired
			}
			in.Observed = matching(d)
		}
		got := Convergence(in)
		blind := in
		blind.Observed = nil
		want := Convergence(blind)
		if got != want && got != (Result{wire.ConvergenceUnknown, ReasonStale}) {
			t.Fatalf("stale observation %+v moved convergence from %+v to %+v", *in.Observed, want, got)
		}
		if got.Value == wire.ConvergenceInSync {
			t.Fatalf("in_sync from a stale observation: %+v", got)
		}
	})
}

func genRows(t *rapid.T, nodeIDs []string) []OutboxRow {
	n := rapid.IntRange(0, 20).Draw(t, "rows")
	rows := make([]OutboxRow, n)
	for i := range rows {
		r := OutboxRow{
			IntentID:             fmt.Sprintf("i%02d", rapid.IntRange(0, 30).Draw(t, "intent")),
			NodeID:               rapid.SampledFrom(nodeIDs).Draw(t, "node"),
			RequiredCapabilities: rapid.SliceOfNDistinct(rapid.SampledFrom(caps), 0, 1, rapid.ID[string]).Draw(t, "required"),
			CreatedAt:            t0.Add(-time.Duration(rapid.IntRange(0, 5).Draw(t, "age")) * time.Second),
			Attempts:             rapid.IntRange(0, 5).Draw(t, "attempts"),
		}
		if rapid.Bool().Draw(t, "expires") {
			r.ExpiresAt = t0.Add(time.Duration(rapid.IntRange(-30, 30).Draw(t, "expiry")) * time.Second)
		}
		if r.Attempts > 0 {
			r.LastFinishedAt = t0.Add(-time.Duration(rapid.IntRange(0, 40).Draw(t, "finished")) * time.Second)
		}
		rows[i] = r
	}
	return rows
}

func genDispatch(t *rapid.T) DispatchInput {
	nodeIDs := []string{"n1", "n2", "n3", "ghost"}
	nodes := map[string]Node{}
	for _, id := range nodeIDs[:3] {
		nodes[id] = genNode(t, id)
	}
	return DispatchInput{
		Rows:  genRows(t, nodeIDs),
		Nodes: nodes,
		Limits: Limits{
			QueueBound:     rapid.IntRange(0, 3).Draw(t, "bound"),
			AttemptTTL:     time.Duration(rapid.IntRange(1, 60).Draw(t, "ttl")) * time.Second,
			BackoffInitial: time.Second,
			BackoffMax:     16 * time.Second,
		},
		Now: t0,
	}
}

// (c) A draining node or one in maintenance never gets a dispatch.
func TestPropSuspendedNeverDispatched(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genDispatch(t)
		for _, d := range PlanDispatch(in).Decisions {
			if n := in.Nodes[d.NodeID]; d.Action == ActionDispatch && (n.Mode == wire.NodeModeDraining || n.Mode == wire.NodeModeMaintenance) {
				t.Fatalf("dispatched %s to node %s in mode %s", d.IntentID, d.NodeID, n.Mode)
			}
		}
	})
}

// (d) PlanDispatch is total (one decision per row, in row order, with a known
// action and a code exactly when it fails) and deterministic, also under a
// permutation of the rows.
func TestPropPlanDispatchTotalDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genDispatch(t)
		plan := PlanDispatch(in)
		if len(plan.Decisions) != len(in.Rows) {
			t.Fatalf("%d decisions for %d rows", len(plan.Decisions), len(in.Rows))
		}
		for i, d := range plan.Decisions {
			if d.IntentID != in.Rows[i].IntentID || d.NodeID != in.Rows[i].NodeID {
				t.Fatalf("decision %d is for %s/%s, row is %s/%s", i, d.IntentID, d.NodeID, in.Rows[i].IntentID, in.Rows[i].NodeID)
			}
			switch d.Action {
			case ActionDispatch, ActionWait:
				if d.Action == ActionWait && d.Reason == "" {
					t.Fatalf("wait without reason: %+v", d)
				}
			case ActionFail:
				if !slices.Contains([]string{CodeExpired, CodeNodeUnavailable, CodeIncompatibleCapability}, d.Code) {
					t.Fatalf("fail with code %q", d.Code)
				}
			default:
				t.Fatalf("unknown action %q", d.Action)
			}
		}
		if diff := cmp.Diff(plan, PlanDispatch(in)); diff != "" {
			t.Fatalf("second plan differs:\n%s", diff)
		}
		perm := rapid.Permutation(indices(len(in.Rows))).Draw(t, "perm")
		shuffled := in
		shuffled.Rows = make([]OutboxRow, len(in.Rows))
		for i, p := range perm {
			shuffled.Rows[i] = in.Rows[p]
		}
		again := PlanDispatch(shuffled)
		for i, p := range perm {
			if diff := cmp.Diff(plan.Decisions[p], again.Decisions[i]); diff != "" && !sameKeyRows(in.Rows, p) {
				t.Fatalf("permuted plan differs for row %d:\n%s", p, diff)
			}
		}
	})
}

// sameKeyRows reports whether row p shares (CreatedAt, IntentID, NodeID)
// with another row; such twins may swap their decisions under permutation.
func sameKeyRows(rows []OutboxRow, p int) bool {
	for i, r := range rows {
		if i != p && r.IntentID == rows[p].IntentID && r.NodeID == rows[p].NodeID && r.CreatedAt.Equal(rows[p].CreatedAt) {
			return true
		}
	}
	return false
}

func indices(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// (e) No row is dispatched at or after its expiry, and no attempt outlives
// its intent.
func TestPropNoDispatchAfterExpiry(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genDispatch(t)
		for i, d := range PlanDispatch(in).Decisions {
			r := in.Rows[i]
			if d.Action != ActionDispatch || r.ExpiresAt.IsZero() {
				continue
			}
			if !in.Now.Before(r.ExpiresAt) || d.AttemptExpiresAt.After(r.ExpiresAt) {
				t.Fatalf("row expiring %s dispatched at %s with attempt expiry %s", r.ExpiresAt, in.Now, d.AttemptExpiresAt)
			}
		}
	})
}

// (f) A node's attempts in flight plus this plan's dispatches never exceed
// the queue bound (when one is set and the node was not already over it).
func TestPropQueueBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genDispatch(t)
		if in.Limits.QueueBound == 0 {
			in.Limits.QueueBound = 1
		}
		per := map[string]int{}
		for _, d := range PlanDispatch(in).Dispatched() {
			per[d.NodeID]++
		}
		for id, n := range per {
			if total := in.Nodes[id].Active + n; total > in.Limits.QueueBound {
				t.Fatalf("node %s: %d active + %d dispatched > bound %d", id, in.Nodes[id].Active, n, in.Limits.QueueBound)
			}
		}
	})
}

// (g) Backoff is monotone non-decreasing in the attempt and capped.
func TestPropBackoff(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		initial := time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "initial"))
		ceiling := time.Duration(rapid.Int64Range(int64(initial), 1<<62).Draw(t, "ceiling"))
		a := rapid.IntRange(0, 200).Draw(t, "attempt")
		b := a + rapid.IntRange(0, 200).Draw(t, "step")
		x, y := Backoff(a, initial, ceiling), Backoff(b, initial, ceiling)
		if x > y {
			t.Fatalf("Backoff(%d) = %s > Backoff(%d) = %s", a, x, b, y)
		}
		if y > ceiling || x < 0 {
			t.Fatalf("Backoff out of [0, %s]: %s, %s", ceiling, x, y)
		}
		if a >= 1 && x < initial {
			t.Fatalf("Backoff(%d) = %s below initial %s", a, x, initial)
		}
	})
}

// genJobConvergence is genConvergence for a job: Job set, and the observed
// states include the job-only recovering.
func genJobConvergence(t *rapid.T) ConvergenceInput {
	in := genConvergence(t)
	in.Job = true
	if in.Observed == nil {
		return in
	}
	if in.Desired != nil && rapid.Bool().Draw(t, "observed.near") {
		// Near the desire but for the state: where the job rows differ
		// from the stream rows.
		o := matching(*in.Desired)
		o.LastError, o.LastErrorAt = in.Observed.LastError, in.Observed.LastErrorAt
		in.Observed = o
	}
	if rapid.Bool().Draw(t, "observed.jobState") {
		in.Observed.State = rapid.SampledFrom([]string{"recovering", "completed"}).Draw(t, "observed.jobStateValue")
	}
	return in
}

// (h) node_lost is answered exactly for a job desired running on a node
// whose lease lapsed, whatever the observation and attempt.
func TestPropNodeLost(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genJobConvergence(t)
		in.Job = rapid.Bool().Draw(t, "job")
		r := Convergence(in)
		lost := in.Job && in.Desired != nil && in.Desired.State == "running" && in.Node.Status == StatusUnavailable
		if lost != (r == Result{wire.ConvergenceDegraded, ReasonNodeLost}) {
			t.Fatalf("Convergence = %+v for job=%v desired=%+v node status %s", r, in.Job, in.Desired, in.Node.Status)
		}
	})
}

// (i) Never in_sync without a matching observation from a fresh node; an
// observation completed matches a job desired running (and nothing else).
func TestPropJobInSyncOnlyOnMatch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genJobConvergence(t)
		in.Job = rapid.Bool().Draw(t, "job")
		if rapid.Bool().Draw(t, "fresh") {
			in.Node.Status, in.Node.Fresh = StatusOnline, true
		}
		if in.Desired != nil && rapid.Bool().Draw(t, "match") {
			in.Observed = matching(*in.Desired)
			if rapid.Bool().Draw(t, "completed") {
				in.Observed.State = "completed"
			}
		}
		r := Convergence(in)
		if r.Value != wire.ConvergenceInSync {
			return
		}
		d, o := in.Desired, in.Observed
		if d == nil || o == nil || !in.Node.observing() {
			t.Fatalf("in_sync without a fresh observation: %+v", r)
		}
		asRunning := *o
		if in.Job && o.State == "completed" {
			asRunning.State = "running"
		}
		if !matches(*d, asRunning) {
			t.Fatalf("in_sync (%s) with desired %+v, observed %+v, job %v", r.Reason, *d, *o, in.Job)
		}
		if want := map[bool]string{true: ReasonCompleted, false: ReasonMatch}[o.State == "completed" && d.State == "running"]; r.Reason != want {
			t.Fatalf("in_sync with reason %q, want %q", r.Reason, want)
		}
	})
}

// (j) A job's recovering observation never yields in_sync, and with no
// work under way on a fresh node it yields degraded/recovering.
func TestPropRecovering(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genJobConvergence(t)
		if in.Desired == nil {
			in.Desired = &Desired{State: "running", Generation: 1, ConfigVersion: "v1"}
		}
		in.Observed = matching(*in.Desired)
		in.Observed.State = "recovering"
		r := Convergence(in)
		if r.Value == wire.ConvergenceInSync {
			t.Fatalf("in_sync from a recovering observation: %+v", r)
		}
		lost := in.Desired.State == "running" && in.Node.Status == StatusUnavailable
		if in.Latest == nil && in.Node.observing() && !lost && r != (Result{wire.ConvergenceDegraded, ReasonRecovering}) {
			t.Fatalf("Convergence = %+v, want degraded/recovering", r)
		}
	})
}

// (k) Streams behave exactly as before jobs: with Job false the result is
// convergenceBefore's for any input, job states in the observation
// included; and with Job true it is the same wherever no job row can apply.
func TestPropStreamsUnchanged(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genJobConvergence(t)
		in.Job = false
		if got, want := Convergence(in), convergenceBefore(in); got != want {
			t.Fatalf("stream: Convergence = %+v, before jobs %+v", got, want)
		}
		in.Job = true
		jobRow := in.Desired != nil && in.Desired.State == "running" && in.Node.Status == StatusUnavailable ||
			in.Observed != nil && (in.Observed.State == "recovering" || in.Observed.State == "completed")
		if got, want := Convergence(in), convergenceBefore(in); !jobRow && got != want {
			t.Fatalf("job outside the job rows: Convergence = %+v, stream rule %+v", got, want)
		}
	})
}

// convergenceBefore is Convergence as it was before jobs, kept verbatim as
// the oracle of TestPropStreamsUnchanged. Do not change it.
func convergenceBefore(in ConvergenceInput) Result {
	d, o, a := in.Desired, in.Observed, in.Latest
	if d == nil {
		return Result{wire.ConvergenceUnknown, ReasonNoDesired}
	}
	if o != nil && matches(*d, *o) {
		if !in.Node.observing() {
			return Result{wire.ConvergenceUnknown, ReasonStale}
		}
		if erroring(*o, in.ErrorWindow, in.Now) {
			return Result{wire.ConvergenceDegraded, ReasonErroring}
		}
		return Result{wire.ConvergenceInSync, ReasonMatch}
	}
	if a == nil {
		if o == nil {
			return Result{wire.ConvergenceUnknown, ReasonNoObservation}
		}
		return driftBefore(*o, in)
	}
	blocked := func(reason string) Result { return Result{wire.ConvergenceBlocked, reason} }
	switch a.State {
	case wire.OpPending:
		switch {
		case in.Node.online() && in.Node.lacks(in.RequiredCapabilities):
			return blocked(CodeIncompatibleCapability)
		case in.Node.suspended():
			return blocked(in.Node.Mode)
		case a.IntentExpired:
			return blocked(CodeExpired)
		case a.RetryPending:
			return Result{wire.ConvergenceDegraded, ReasonRetrying}
		case !in.Node.online():
			return Result{wire.ConvergencePending, ReasonNodeOffline}
		}
		return Result{wire.ConvergencePending, ReasonNotDispatched}
	case wire.OpDispatched, wire.OpAcknowledged:
		if a.RetryPending {
			return Result{wire.ConvergenceDegraded, ReasonRetrying}
		}
		if a.State == wire.OpAcknowledged {
			return Result{wire.ConvergenceApplying, ReasonAcknowledged}
		}
		return Result{wire.ConvergenceApplying, ReasonDispatched}
	case wire.OpSucceeded:
		if o != nil && o.Generation >= d.Generation {
			return driftBefore(*o, in)
		}
		return Result{wire.ConvergenceApplying, ReasonAwaitingReport}
	case wire.OpFailed, wire.OpTimedOut:
		switch {
		case permanent(a.FailureCode):
			return blocked(a.FailureCode)
		case a.IntentExpired:
			return blocked(CodeExpired)
		case a.RetryPending && in.Node.suspended():
			return blocked(in.Node.Mode)
		case a.RetryPending:
			return Result{wire.ConvergenceDegraded, ReasonRetrying}
		case a.FailureCode != "":
			return blocked(a.FailureCode)
		case a.State == wire.OpTimedOut:
			return blocked(ReasonTimedOut)
		}
		return blocked(ReasonFailed)
	case wire.OpCancelled:
		return blocked(ReasonCancelled)
	case wire.OpSuperseded:
		return Result{wire.ConvergencePending, ReasonSuperseded}
	}
	return Result{wire.ConvergenceUnknown, ReasonUnknownAttempt}
}

func driftBefore(o Observed, in ConvergenceInput) Result {
	switch {
	case !in.Node.observing():
		return Result{wire.ConvergenceUnknown, ReasonStale}
	case o.State == ObservedFailed:
		return Result{wire.ConvergenceDegraded, ReasonObservedFailed}
	case erroring(o, in.ErrorWindow, in.Now):
		return Result{wire.ConvergenceDegraded, ReasonErroring}
	}
	return Result{wire.ConvergenceDegraded, ReasonDrift}
}
