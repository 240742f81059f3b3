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
	online := Node{Status: StatusOnline, Mode: ModeActive, Fresh: true}
	offline := Node{Status: StatusUnavailable, Mode: ModeActive}
	// unreported is online but has not reported since the Hub started (or
	// since it came back).
	unreported := Node{Status: StatusOnline, Mode: ModeActive}
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
		{"match, offline node was fresh: stale", ConvergenceInput{Desired: want, Observed: match, Node: Node{Status: StatusUnavailable, Mode: ModeActive, Fresh: true}}, Result{wire.ConvergenceUnknown, ReasonStale}},
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
		{"pending, capable", ConvergenceInput{Desired: want, Node: Node{Status: StatusOnline, Mode: ModeActive, Capabilities: []string{"network_shuffle"}, Fresh: true}, RequiredCapabilities: []string{"network_shuffle"}, Latest: att(wire.OpPending)}, Result{wire.ConvergencePending, ReasonNotDispatched}},
		{"pending, offline node's capabilities not judged", ConvergenceInput{Desired: want, Node: offline, RequiredCapabilities: []string{"network_shuffle"}, Latest: att(wire.OpPending)}, Result{wire.ConvergencePending, ReasonNodeOffline}},
		{"pending, draining", ConvergenceInput{Desired: want, Node: Node{Status: StatusOnline, Mode: ModeDraining}, Latest: att(wire.OpPending)}, Result{wire.ConvergenceBlocked, ModeDraining}},
		{"pending, maintenance and offline", ConvergenceInput{Desired: want, Node: Node{Status: StatusUnavailable, Mode: ModeMaintenance}, Latest: att(wire.OpPending)}, Result{wire.ConvergenceBlocked, ModeMaintenance}},
		{"pending, intent expired", ConvergenceInput{Desired: want, Node: offline, Latest: &LatestAttempt{State: wire.OpPending, IntentExpired: true}}, Result{wire.ConvergenceBlocked, CodeExpired}},
		{"pending retry", ConvergenceInput{Desired: want, Node: online, Latest: &LatestAttempt{State: wire.OpPending, RetryPending: true}}, Result{wire.ConvergenceDegraded, ReasonRetrying}},
		{"dispatched", ConvergenceInput{Desired: want, Observed: older, Node: online, Latest: att(wire.OpDispatched)}, Result{wire.ConvergenceApplying, ReasonDispatched}},
		{"dispatched, node draining (in flight kept)", ConvergenceInput{Desired: want, Observed: older, Node: Node{Status: StatusOnline, Mode: ModeDraining}, Latest: att(wire.OpDispatched)}, Result{wire.ConvergenceApplying, ReasonDispatched}},
		{"acknowledged", ConvergenceInput{Desired: want, Observed: older, Node: online, Latest: att(wire.OpAcknowledged)}, Result{wire.ConvergenceApplying, ReasonAcknowledged}},
		{"acknowledged retry", ConvergenceInput{Desired: want, Observed: older, Node: online, Latest: &LatestAttempt{State: wire.OpAcknowledged, RetryPending: true}}, Result{wire.ConvergenceDegraded, ReasonRetrying}},
		{"succeeded, no report yet", ConvergenceInput{Desired: want, Node: online, Latest: att(wire.OpSucceeded)}, Result{wire.ConvergenceApplying, ReasonAwaitingReport}},
		{"succeeded, older report", ConvergenceInput{Desired: want, Observed: older, Node: online, Latest: att(wire.OpSucceeded)}, Result{wire.ConvergenceApplying, ReasonAwaitingReport}},
		{"succeeded, drift", ConvergenceInput{Desired: want, Observed: drifted, Node: online, Latest: att(wire.OpSucceeded)}, Result{wire.ConvergenceDegraded, ReasonDrift}},
		{"succeeded, observed failed", ConvergenceInput{Desired: want, Observed: failed, Node: online, Latest: att(wire.OpSucceeded)}, Result{wire.ConvergenceDegraded, ReasonObservedFailed}},
		{"failed, retry", ConvergenceInput{Desired: want, Observed: older, Node: online, Latest: &LatestAttempt{State: wire.OpFailed, FailureCode: "engine_error", RetryPending: true}}, Result{wire.ConvergenceDegraded, ReasonRetrying}},
		{"timed out, retry", ConvergenceInput{Desired: want, Node: online, Latest: &LatestAttempt{State: wire.OpTimedOut, RetryPending: true}}, Result{wire.ConvergenceDegraded, ReasonRetrying}},
		{"timed out, retry, maintenance", ConvergenceInput{Desired: want, Node: Node{Status: StatusOnline, Mode: ModeMaintenance}, Latest: &LatestAttempt{State: wire.OpTimedOut, RetryPending: true}}, Result{wire.ConvergenceBlocked, ModeMaintenance}},
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
