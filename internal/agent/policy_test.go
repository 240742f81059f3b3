package agent_test

import (
	"slices"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/agent"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/policy"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestPolicyCapabilitiesOff: a node whose remote policy switches job and
// configuration control off does not advertise them, and a command of
// either kind delivered all the same fails with incompatible_capability
// before anything runs: the configuration stays the one the node runs.
func TestPolicyCapabilitiesOff(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	dir := t.TempDir()
	rp := config.Default().RemotePolicy
	rp.JobControl, rp.ConfigControl = false, false
	tn := startNode(t, nodeOptions{stateDir: dir, hubURLs: []string{hub.URL}, streams: []string{"a"}, tune: func(o *agent.Options) {
		o.ReportPeriod = time.Hour
		o.Policy = policy.New(rp, dir)
	}})
	hub.waitConfiguration(t, wire.ReportConfiguration{NodeVersion: "v1"})
	hub.mu.Lock()
	caps := hub.registers[0].Capabilities
	hub.mu.Unlock()
	if slices.Contains(caps, wire.CapabilityConfigControl) || slices.Contains(caps, wire.CapabilityJobControl) {
		t.Errorf("capabilities %v hold a capability the policy switched off", caps)
	}
	if !slices.Contains(caps, wire.CapabilityStreamControl) {
		t.Errorf("capabilities %v lack %s", caps, wire.CapabilityStreamControl)
	}
	hub.enqueue(applyCommand("cfg-off", "att-1", "v7", 3, hubConfig("")))
	r := hub.waitFinal(t, "cfg-off", "att-1")
	if r.State != wire.ResultFailed || r.Failure == nil || r.Failure.Code != "incompatible_capability" {
		t.Fatalf("apply with config_control off: %+v", r)
	}
	hub.enqueue(wire.Command{CommandID: "job-off", AttemptID: "att-1", Operation: wire.CommandJobValidate, NodeID: testNodeID, ResourceID: "j1"})
	r = hub.waitFinal(t, "job-off", "att-1")
	if r.State != wire.ResultFailed || r.Failure == nil || r.Failure.Code != "incompatible_capability" {
		t.Fatalf("job_validate with job_control off: %+v", r)
	}
	if v := tn.n.ConfigVersion(); v != "v1" {
		t.Errorf("the node runs %s after a refused apply, want v1", v)
	}
	tn.stop()
}
