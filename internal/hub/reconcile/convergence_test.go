package reconcile

import (
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestConvergence(t *testing.T) {
	want := &Desired{State: "running", Generation: 3, ConfigVersion: "v2"}
	restart := &Desired{State: "running", Generation: 4, ConfigVersion: "v2", ActionID: "act-1"}
	match := &Observed{State: "running", Generation: 3, ConfigVersion: "v2"}
	older := &Observed{State: "stopped", Generation: 2, ConfigVersion: "v2"}
	drifted := &Observed{State: "stopped", Generation: 3, ConfigVersion: "v2"}
	failed := &Observed{State: "failed", Generation: 3, ConfigVersion: "v2"}
	erroring := &Observed{State: "running", Generation: 3, ConfigVersion: "v2", LastError: "boom", LastErrorAt: t0.Add(-time.Second)}
	oldError := &Observed{State: "running", Generation: 3, ConfigVersion: "v2", LastError: "boom", LastErrorAt: t0.Add(-time.Hour)}
	online := Node{Status: StatusOnline, Mode: wire.NodeModeActive, Fresh: true}
	offline := Node{Status: StatusUnavailable, Mode: wire.NodeModeActive}
	// unreported is online but has not reported since the Hub started (or
	// since it came back).
	unreported := Node{Status: StatusOnline, Mode: wire.NodeModeActive}
	att := func(state string) *LatestAttempt { return &LatestAttempt{State: state} }
	tests := []struct {
		name string
		in   ConvergenceInput
		want Result
	}{
		{"no desire", ConvergenceInput{Observed: match, Node: online}, Result{wire.ConvergenceUnknown, ReasonNoDesired}},
		{"no observation, no attempt", ConvergenceInput{Desired: want, Node: online}, Result{wire.ConvergenceUnknown, ReasonNoObservation}},
		{"match", ConvergenceInput{Desired: want, Observed: match, Node: online}, Result{wire.ConvergenceInSync, ReasonMatch}},
		{"match, node offline: stale", ConvergenceInput{Desired: want, Observed: match, Node: offline, Latest: att(wire.OpSucceeded)}, Result{wire.ConvergenceUnknown, ReasonStale}},
		{"match, offline node was fresh: stale", ConvergenceInput{Desired: want, Observed: match, Node: Node{Status: StatusUnavailable, Mode: wire.NodeModeActive, Fresh: true}}, Result{wire.ConvergenceUnknown, ReasonStale}},
		{"match, no report since start: stale", ConvergenceInput{Desired: want, Observed: match, Node: unreported, Latest: att(wire.OpSucceeded)}, Result{wire.ConvergenceUnknown, ReasonStale}},
		{"match erroring, stale", ConvergenceInput{Desired: want, Observed: erroring, Node: unreported}, Result{wire.ConvergenceUnknown, ReasonStale}},
		{"no attempt, drift, stale", ConvergenceInput{Desired: want, Observed: drifted, Node: offline}, Result{wire.ConvergenceUnknown, ReasonStale}},
		{"no attempt, failed, stale", ConvergenceInput{Desired: want, Observed: failed, Node: unreported}, Result{wire.ConvergenceUnknown, ReasonStale}},
		{"succeeded, drift, stale", ConvergenceInput{Desired: want, Observed: drifted, Node: offline, Latest: att(wire.OpSucceeded)}, Result{wire.ConvergenceUnknown, ReasonStale}},
		{"succeeded, older report, stale", ConvergenceInput{Desired: want, Observed: older, Node: unreported, Latest: att(wire.OpSucceeded)}, Result{wire.ConvergenceApplying, ReasonAwaitingReport}},
		{"dispatched, stale", ConvergenceInput{Desired: want, Observed: older, Node: unreported, Latest: att(wire.OpDispatched)}, Result{wire.ConvergenceApplying, ReasonDispatched}},
		{"match, config differs", ConvergenceInput{Desired: want, Observed: &Observed{State: "running", Generation: 3, ConfigVersion: "v1"}, Node: online, Latest: att(wire.OpSucceeded)}, Result{wire.ConvergenceDegraded, ReasonDrift}},
		{"match, any config version desired", ConvergenceInput{Desired: &Desired{State: "running", Generation: 3}, Observed: match, Node: online}, Result{wire.ConvergenceInSync, ReasonMatch}},
		{"match erroring", ConvergenceInput{Desired: want, Observed: erroring, Node: online}, Result{wire.ConvergenceDegraded, ReasonErroring}},
		{"match erroring inside window", ConvergenceInput{Desired: want, Observed: erroring, Node: online, ErrorWindow: time.Minute, Now: t0}, Result{wire.ConvergenceDegraded, ReasonErroring}},
		{"match, error older than window", ConvergenceInput{Desired: want, Observed: oldError, Node: online, ErrorWindow: time.Minute, Now: t0}, Result{wire.ConvergenceInSync, ReasonMatch}},
		{"restart, action not reported", ConvergenceInput{Desired: restart, Observed: &Observed{State: "running", Generation: 4, ConfigVersion: "v2", ActionID: "act-0"}, Node: online, Latest: att(wire.OpAcknowledged)}, Result{wire.ConvergenceApplying, ReasonAcknowledged}},
		{"restart, action reported", ConvergenceInput{Desired: restart, Observed: &Observed{State: "running", Generation: 4, ConfigVersion: "v2", ActionID: "act-1"}, Node: online, Latest: att(wire.OpAcknowledged)}, Result{wire.ConvergenceInSync, ReasonMatch}},
		{"no attempt, drift", ConvergenceInput{Desired: want, Observed: drifted, Node: online}, Result{wire.ConvergenceDegraded, ReasonDrift}},
		{"no attempt, failed", ConvergenceInput{Desired: want, Observed: failed, Node: online}, Result{wire.ConvergenceDegraded, ReasonObservedFailed}},
		{"no attempt, erroring mismatch", ConvergenceInput{Desired: want, Observed: &Observed{State: "stopped", Generation: 3, ConfigVersion: "v2", LastError: "x"}, Node: online}, Result{wire.ConvergenceDegraded, ReasonErroring}},
		{"pending", ConvergenceInput{Desired: want, Node: online, Latest: att(wire.OpPending)}, Result{wire.ConvergencePending, ReasonNotDispatched}},
		{"pending, node offline", ConvergenceInput{Desired: want, Observed: older, Node: offline, Latest: att(wire.OpPending)}, Result{wire.ConvergencePending, ReasonNodeOffline}},
		{"pending, node never seen", ConvergenceInput{Desired: want, Node: Node{Status: StatusUnknown}, Latest: att(wire.OpPending)}, Result{wire.ConvergencePending, ReasonNodeOffline}},
		{"pending, incompatible", ConvergenceInput{Desired: want, Node: online, RequiredCapabilities: []string{"network_shuffle"}, Latest: att(wire.OpPending)}, Result{wire.ConvergenceBlocked, CodeIncompatibleCapability}},
		{"pending, capable", ConvergenceInput{Desired: want, Node: Node{Status: StatusOnline, Mode: wire.NodeModeActive, Capabilities: []string{"network_shuffle"}, Fresh: true}, RequiredCapabilities: []string{"network_shuffle"}, Latest: att(wire.OpPending)}, Result{wire.ConvergencePending, ReasonNotDispatched}},
		{"pending, offline node's capabilities not judged", ConvergenceInput{Desired: want, Node: offline, RequiredCapabilities: []string{"network_shuffle"}, Latest: att(wire.OpPending)}, Result{wire.ConvergencePending, ReasonNodeOffline}},
		{"pending, draining", ConvergenceInput{Desired: want, Node: Node{Status: StatusOnline, Mode: wire.NodeModeDraining}, Latest: att(wire.OpPending)}, Result{wire.ConvergenceBlocked, wire.NodeModeDraining}},
		{"pending, maintenance and offline", ConvergenceInput{Desired: want, Node: Node{Status: StatusUnavailable, Mode: wire.NodeModeMaintenance}, Latest: att(wire.OpPending)}, Result{wire.ConvergenceBlocked, wire.NodeModeMaintenance}},
		{"pending, intent expired", ConvergenceInput{Desired: want, Node: offline, Latest: &LatestAttempt{State: wire.OpPending, IntentExpired: true}}, Result{wire.ConvergenceBlocked, CodeExpired}},
		{"pending retry", ConvergenceInput{Desired: want, Node: online, Latest: &LatestAttempt{State: wire.OpPending, RetryPending: true}}, Result{wire.ConvergenceDegraded, ReasonRetrying}},
		{"dispatched", ConvergenceInput{Desired: want, Observed: older, Node: online, Latest: att(wire.OpDispatched)}, Result{wire.ConvergenceApplying, ReasonDispatched}},
		{"dispatched, node draining (in flight kept)", ConvergenceInput{Desired: want, Observed: older, Node: Node{Status: StatusOnline, Mode: wire.NodeModeDraining}, Latest: att(wire.OpDispatched)}, Result{wire.ConvergenceApplying, ReasonDispatched}},
		{"acknowledged", ConvergenceInput{Desired: want, Observed: older, Node: online, Latest: att(wire.OpAcknowledged)}, Result{wire.ConvergenceApplying, ReasonAcknowledged}},
		{"acknowledged retry", ConvergenceInput{Desired: want, Observed: older, Node: online, Latest: &LatestAttempt{State: wire.OpAcknowledged, RetryPending: true}}, Result{wire.ConvergenceDegraded, ReasonRetrying}},
		{"succeeded, no report yet", ConvergenceInput{Desired: want, Node: online, Latest: att(wire.OpSucceeded)}, Result{wire.ConvergenceApplying, ReasonAwaitingReport}},
		{"succeeded, older report", ConvergenceInput{Desired: want, Observed: older, Node: online, Latest: att(wire.OpSucceeded)}, Result{wire.ConvergenceApplying, ReasonAwaitingReport}},
		{"succeeded, drift", ConvergenceInput{Desired: want, Observed: drifted, Node: online, Latest: att(wire.OpSucceeded)}, Result{wire.ConvergenceDegraded, ReasonDrift}},
		{"succeeded, observed failed", ConvergenceInput{Desired: want, Observed: failed, Node: online, Latest: att(wire.OpSucceeded)}, Result{wire.ConvergenceDegraded, ReasonObservedFailed}},
		{"failed, retry", ConvergenceInput{Desired: want, Observed: older, Node: online, Latest: &LatestAttempt{State: wire.OpFailed, FailureCode: "engine_error", RetryPending: true}}, Result{wire.ConvergenceDegraded, ReasonRetrying}},
		{"timed out, retry", ConvergenceInput{Desired: want, Node: online, Latest: &LatestAttempt{State: wire.OpTimedOut, RetryPending: true}}, Result{wire.ConvergenceDegraded, ReasonRetrying}},
		{"timed out, retry, maintenance", ConvergenceInput{Desired: want, Node: Node{Status: StatusOnline, Mode: wire.NodeModeMaintenance}, Latest: &LatestAttempt{State: wire.OpTimedOut, RetryPending: true}}, Result{wire.ConvergenceBlocked, wire.NodeModeMaintenance}},
		{"failed, incompatible", ConvergenceInput{Desired: want, Node: online, Latest: &LatestAttempt{State: wire.OpFailed, FailureCode: CodeIncompatibleCapability, RetryPending: true}}, Result{wire.ConvergenceBlocked, CodeIncompatibleCapability}},
		{"failed, expired", ConvergenceInput{Desired: want, Node: online, Latest: &LatestAttempt{State: wire.OpFailed, FailureCode: CodeExpired}}, Result{wire.ConvergenceBlocked, CodeExpired}},
		{"failed, node unavailable", ConvergenceInput{Desired: want, Node: offline, Latest: &LatestAttempt{State: wire.OpFailed, FailureCode: CodeNodeUnavailable}}, Result{wire.ConvergenceBlocked, CodeNodeUnavailable}},
		{"timed out, intent expired", ConvergenceInput{Desired: want, Node: online, Latest: &LatestAttempt{State: wire.OpTimedOut, RetryPending: true, IntentExpired: true}}, Result{wire.ConvergenceBlocked, CodeExpired}},
		{"failed, no retry, code", ConvergenceInput{Desired: want, Node: online, Latest: &LatestAttempt{State: wire.OpFailed, FailureCode: "config_invalid"}}, Result{wire.ConvergenceBlocked, "config_invalid"}},
		{"failed, no retry, no code", ConvergenceInput{Desired: want, Node: online, Latest: att(wire.OpFailed)}, Result{wire.ConvergenceBlocked, ReasonFailed}},
		{"timed out, no retry", ConvergenceInput{Desired: want, Node: online, Latest: att(wire.OpTimedOut)}, Result{wire.ConvergenceBlocked, ReasonTimedOut}},
		{"cancelled", ConvergenceInput{Desired: want, Observed: older, Node: online, Latest: att(wire.OpCancelled)}, Result{wire.ConvergenceBlocked, ReasonCancelled}},
		{"superseded", ConvergenceInput{Desired: want, Observed: older, Node: online, Latest: att(wire.OpSuperseded)}, Result{wire.ConvergencePending, ReasonSuperseded}},
		{"unknown attempt state", ConvergenceInput{Desired: want, Node: online, Latest: att("bogus")}, Result{wire.ConvergenceUnknown, ReasonUnknownAttempt}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Convergence(tt.in)); diff != "" {
				t.Errorf("Convergence (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConvergenceJob covers the job rows, each next to the stream result
// for the same input (Job false), which must stay what it always was.
func TestConvergenceJob(t *testing.T) {
	running := &Desired{State: "running", Generation: 3, ConfigVersion: "v2"}
	stopped := &Desired{State: "stopped", Generation: 3, ConfigVersion: "v2"}
	restart := &Desired{State: "running", Generation: 4, ConfigVersion: "v2", ActionID: "act-1"}
	match := &Observed{State: "running", Generation: 3, ConfigVersion: "v2"}
	recovering := &Observed{State: "recovering", Generation: 3, ConfigVersion: "v2", LastError: "task agg#1 failed"}
	done := &Observed{State: "completed", Generation: 3, ConfigVersion: "v2"}
	online := Node{Status: StatusOnline, Mode: wire.NodeModeActive, Fresh: true}
	lost := Node{Status: StatusUnavailable, Mode: wire.NodeModeActive, Fresh: true}
	never := Node{Status: StatusUnknown}
	att := func(state string) *LatestAttempt { return &LatestAttempt{State: state} }
	in := func(d *Desired, o *Observed, n Node, a *LatestAttempt) ConvergenceInput {
		return ConvergenceInput{Desired: d, Observed: o, Node: n, Latest: a, Now: t0}
	}
	res := func(v, r string) Result { return Result{v, r} }
	tests := []struct {
		name        string
		in          ConvergenceInput
		job, stream Result
	}{
		{"recovering, no attempt", in(running, recovering, online, nil),
			res(wire.ConvergenceDegraded, ReasonRecovering), res(wire.ConvergenceDegraded, ReasonErroring)},
		{"recovering without an error", in(running, &Observed{State: "recovering", Generation: 3, ConfigVersion: "v2"}, online, nil),
			res(wire.ConvergenceDegraded, ReasonRecovering), res(wire.ConvergenceDegraded, ReasonDrift)},
		{"recovering, attempt succeeded", in(running, recovering, online, att(wire.OpSucceeded)),
			res(wire.ConvergenceDegraded, ReasonRecovering), res(wire.ConvergenceDegraded, ReasonErroring)},
		{"recovering, desired stopped", in(stopped, recovering, online, nil),
			res(wire.ConvergenceDegraded, ReasonRecovering), res(wire.ConvergenceDegraded, ReasonErroring)},
		{"recovering, stale", in(running, recovering, Node{Status: StatusOnline, Mode: wire.NodeModeActive}, nil),
			res(wire.ConvergenceUnknown, ReasonStale), res(wire.ConvergenceUnknown, ReasonStale)},
		{"recovering, work under way", in(running, recovering, online, att(wire.OpDispatched)),
			res(wire.ConvergenceApplying, ReasonDispatched), res(wire.ConvergenceApplying, ReasonDispatched)},
		{"node lost, matching observation", in(running, match, lost, nil),
			res(wire.ConvergenceDegraded, ReasonNodeLost), res(wire.ConvergenceUnknown, ReasonStale)},
		{"node lost, no observation", in(running, nil, lost, nil),
			res(wire.ConvergenceDegraded, ReasonNodeLost), res(wire.ConvergenceUnknown, ReasonNoObservation)},
		{"node lost, attempt pending", in(running, nil, lost, att(wire.OpPending)),
			res(wire.ConvergenceDegraded, ReasonNodeLost), res(wire.ConvergencePending, ReasonNodeOffline)},
		{"node lost, attempt failed permanently", in(running, match, lost, &LatestAttempt{State: wire.OpFailed, FailureCode: CodeNodeUnavailable}),
			res(wire.ConvergenceDegraded, ReasonNodeLost), res(wire.ConvergenceUnknown, ReasonStale)},
		{"node lost, maintenance", in(running, nil, Node{Status: StatusUnavailable, Mode: wire.NodeModeMaintenance}, att(wire.OpPending)),
			res(wire.ConvergenceDegraded, ReasonNodeLost), res(wire.ConvergenceBlocked, wire.NodeModeMaintenance)},
		{"node lost, desired stopped: stale as before", in(stopped, &Observed{State: "stopped", Generation: 3, ConfigVersion: "v2"}, lost, nil),
			res(wire.ConvergenceUnknown, ReasonStale), res(wire.ConvergenceUnknown, ReasonStale)},
		{"node lost, desired stopped, attempt pending", in(stopped, nil, lost, att(wire.OpPending)),
			res(wire.ConvergencePending, ReasonNodeOffline), res(wire.ConvergencePending, ReasonNodeOffline)},
		{"node never seen is not lost", in(running, nil, never, att(wire.OpPending)),
			res(wire.ConvergencePending, ReasonNodeOffline), res(wire.ConvergencePending, ReasonNodeOffline)},
		{"node never seen, observation", in(running, match, never, nil),
			res(wire.ConvergenceUnknown, ReasonStale), res(wire.ConvergenceUnknown, ReasonStale)},
		{"completed, desired running", in(running, done, online, att(wire.OpSucceeded)),
			res(wire.ConvergenceInSync, ReasonCompleted), res(wire.ConvergenceDegraded, ReasonDrift)},
		{"completed, no attempt", in(running, done, online, nil),
			res(wire.ConvergenceInSync, ReasonCompleted), res(wire.ConvergenceDegraded, ReasonDrift)},
		{"completed, older generation", in(running, &Observed{State: "completed", Generation: 2, ConfigVersion: "v2"}, online, att(wire.OpSucceeded)),
			res(wire.ConvergenceApplying, ReasonAwaitingReport), res(wire.ConvergenceApplying, ReasonAwaitingReport)},
		{"completed, other config version", in(running, &Observed{State: "completed", Generation: 3, ConfigVersion: "v1"}, online, nil),
			res(wire.ConvergenceDegraded, ReasonDrift), res(wire.ConvergenceDegraded, ReasonDrift)},
		{"completed, restart action not reported", in(restart, &Observed{State: "completed", Generation: 4, ConfigVersion: "v2"}, online, att(wire.OpAcknowledged)),
			res(wire.ConvergenceApplying, ReasonAcknowledged), res(wire.ConvergenceApplying, ReasonAcknowledged)},
		{"completed, restart action reported", in(restart, &Observed{State: "completed", Generation: 4, ConfigVersion: "v2", ActionID: "act-1"}, online, nil),
			res(wire.ConvergenceInSync, ReasonCompleted), res(wire.ConvergenceDegraded, ReasonDrift)},
		{"completed, stale", in(running, done, Node{Status: StatusOnline, Mode: wire.NodeModeActive}, nil),
			res(wire.ConvergenceUnknown, ReasonStale), res(wire.ConvergenceUnknown, ReasonStale)},
		{"completed, erroring", in(running, &Observed{State: "completed", Generation: 3, ConfigVersion: "v2", LastError: "sink flush"}, online, nil),
			res(wire.ConvergenceDegraded, ReasonErroring), res(wire.ConvergenceDegraded, ReasonErroring)},
		{"completed, desired stopped", in(stopped, done, online, nil),
			res(wire.ConvergenceDegraded, ReasonDrift), res(wire.ConvergenceDegraded, ReasonDrift)},
		{"running matches as for a stream", in(running, match, online, nil),
			res(wire.ConvergenceInSync, ReasonMatch), res(wire.ConvergenceInSync, ReasonMatch)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := tt.in
			job.Job = true
			if diff := cmp.Diff(tt.job, Convergence(job)); diff != "" {
				t.Errorf("job: Convergence (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.stream, Convergence(tt.in)); diff != "" {
				t.Errorf("stream: Convergence (-want +got):\n%s", diff)
			}
		})
	}
}
