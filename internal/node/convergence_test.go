package node

import (
	"testing"

	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/wire"
)

func TestConvergence(t *testing.T) {
	run := &desired{State: DesiredRunning, Generation: 3, Target: 3, ConfigVersion: "v2"}
	stop := &desired{State: DesiredStopped, Generation: 4, Target: 4, ConfigVersion: "v2"}
	restart := &desired{State: DesiredRunning, Generation: 5, Target: 5, ConfigVersion: "v2", ActionID: "act-1"}
	// A cancelled newest write leaves the target at the previous one.
	cancelled := &desired{State: DesiredRunning, Generation: 6, Target: 5, ConfigVersion: "v2"}
	match := func(d *desired) applied {
		return applied{Generation: d.Target, ConfigVersion: d.ConfigVersion, ActionID: d.ActionID}
	}
	tests := []struct {
		name    string
		d       *desired
		obs     engine.StreamState
		a       applied
		pending bool
		want    string
	}{
		{"no desire", nil, engine.StreamRunning, applied{}, false, wire.ConvergenceUnknown},
		{"queued operation", run, engine.StreamRunning, match(run), true, wire.ConvergenceApplying},
		{"running as desired", run, engine.StreamRunning, match(run), false, wire.ConvergenceInSync},
		{"finite stream completed", run, engine.StreamCompleted, match(run), false, wire.ConvergenceInSync},
		{"still starting", run, engine.StreamStarting, match(run), false, wire.ConvergenceApplying},
		{"failed", run, engine.StreamFailed, match(run), false, wire.ConvergenceDegraded},
		{"old generation", run, engine.StreamRunning, applied{Generation: 2, ConfigVersion: "v2"}, false, wire.ConvergenceApplying},
		{"old configuration", run, engine.StreamRunning, applied{Generation: 3, ConfigVersion: "v1"}, false, wire.ConvergenceApplying},
		{"stopped as desired", stop, engine.StreamStopped, match(stop), false, wire.ConvergenceInSync},
		{"stop not yet done", stop, engine.StreamStopping, match(stop), false, wire.ConvergenceApplying},
		{"restart reported", restart, engine.StreamRunning, match(restart), false, wire.ConvergenceInSync},
		{"cancelled write: target reached", cancelled, engine.StreamRunning, applied{Generation: 5, ConfigVersion: "v2"}, false, wire.ConvergenceInSync},
		{"restart without its action id", restart, engine.StreamRunning, applied{Generation: 5, ConfigVersion: "v2", ActionID: "act-0"}, false, wire.ConvergenceApplying},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := convergence(tt.d, tt.obs, tt.a, tt.pending); got != tt.want {
				t.Errorf("convergence = %s, want %s", got, tt.want)
			}
		})
	}
}
