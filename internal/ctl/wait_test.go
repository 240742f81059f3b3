package ctl

import (
	"bufio"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/wire"
)

// conv is a convergence_changed event of a stream, job or configuration.
func conv(node, resource, typ, value, reason string, gen int64) wire.Event {
	return wire.Event{Kind: wire.EventConvergenceChanged, NodeID: node, ResourceID: resource,
		Data: map[string]any{"convergence": value, "reason": reason, "generation": float64(gen), "resource_type": typ}}
}

func TestDecideOverEventSequences(t *testing.T) {
	stream := Target{Kind: waitStream, NodeID: "node-a", ResourceID: "orders", OperationID: "op-1", Generation: 2}
	job := Target{Kind: waitJob, ResourceID: "user-counts", OperationID: "op-2", Generation: 5}
	cfg := Target{Kind: waitConfiguration, NodeID: "node-a", OperationID: "op-3", Generation: 1}
	op := Target{Kind: waitOperation, OperationID: "op-4"}
	ro := Target{Kind: waitRollout, ResourceID: "ro-1", Success: wire.RolloutSucceeded}
	pause := Target{Kind: waitRollout, ResourceID: "ro-1", Success: wire.RolloutPaused}
	tests := []struct {
		name    string
		target  Target
		events  []wire.Event
		want    Verdict
		wantWhy string
	}{
		{"stream converges", stream, []wire.Event{
			conv("node-a", "orders", "stream", "pending", "not_dispatched", 2),
			conv("node-a", "orders", "stream", "applying", "dispatched", 2),
			conv("node-a", "orders", "stream", "in_sync", "match", 2),
		}, Succeeded, ""},
		{"in_sync of an older generation is not ours", stream, []wire.Event{
			conv("node-a", "orders", "stream", "in_sync", "match", 1),
		}, Waiting, ""},
		{"a newer generation in sync includes ours", stream, []wire.Event{
			conv("node-a", "orders", "stream", "in_sync", "match", 3),
		}, Succeeded, ""},
		{"another node's stream of the same id", stream, []wire.Event{
			conv("node-b", "orders", "stream", "in_sync", "match", 2),
		}, Waiting, ""},
		{"a job of the same id is not the stream", stream, []wire.Event{
			conv("node-a", "orders", "job", "in_sync", "match", 2),
		}, Waiting, ""},
		{"the operation fails on the node", stream, []wire.Event{
			conv("node-a", "orders", "stream", "applying", "dispatched", 2),
			{Kind: wire.EventCommandFailed, OperationID: "op-1", Message: "configuration version v9 is not the version this node runs",
				Data: map[string]any{"failure_code": "config_version_unavailable"}},
		}, Failed, "operation failed: config_version_unavailable: configuration version v9 is not the version this node runs"},
		{"another operation's failure is not ours", stream, []wire.Event{
			{Kind: wire.EventCommandFailed, OperationID: "op-9", Message: "boom"},
		}, Waiting, ""},
		{"cancelled", stream, []wire.Event{
			{Kind: wire.EventOperationCancelled, OperationID: "op-1"},
		}, Failed, "operation cancelled"},
		{"degraded while retrying waits", stream, []wire.Event{
			conv("node-a", "orders", "stream", "degraded", "retrying", 2),
		}, Waiting, ""},
		{"blocked by maintenance waits", stream, []wire.Event{
			conv("node-a", "orders", "stream", "blocked", "node_offline", 2),
		}, Waiting, ""},
		{"blocked because the intent expired fails", stream, []wire.Event{
			conv("node-a", "orders", "stream", "blocked", "expired", 2),
		}, Failed, "blocked (expired)"},
		{"a job converges on any node", job, []wire.Event{
			conv("node-b", "user-counts", "job", "applying", "dispatched", 5),
			conv("node-b", "user-counts", "job", "in_sync", "match", 5),
		}, Succeeded, ""},
		{"a job that fails on the node", job, []wire.Event{
			conv("node-a", "user-counts", "job", "degraded", "observed_failed", 5),
		}, Failed, "degraded (observed_failed)"},
		{"configuration converges", cfg, []wire.Event{
			conv("node-a", "configuration", "configuration", "applying", "dispatched", 1),
			conv("node-a", "configuration", "configuration", "in_sync", "match", 1),
		}, Succeeded, ""},
		{"an operation succeeds", op, []wire.Event{
			{Kind: wire.EventCommandAcknowledged, OperationID: "op-4"},
			{Kind: wire.EventCommandSucceeded, OperationID: "op-4"},
		}, Succeeded, ""},
		{"an operation fails", op, []wire.Event{
			{Kind: wire.EventCommandFailed, OperationID: "op-4", Data: map[string]any{"failure_code": "expired"}},
		}, Failed, "operation failed: expired"},
		{"a rollout succeeds", ro, []wire.Event{
			{Kind: wire.EventRolloutChanged, ResourceID: "ro-1", Data: map[string]any{"state": "running"}},
			{Kind: wire.EventRolloutChanged, ResourceID: "ro-1", NodeID: "node-a", Data: map[string]any{"node_id": "node-a", "phase": "passed"}},
			{Kind: wire.EventRolloutChanged, ResourceID: "ro-1", Data: map[string]any{"state": "succeeded"}},
		}, Succeeded, ""},
		{"a rollout fails", ro, []wire.Event{
			{Kind: wire.EventRolloutChanged, ResourceID: "ro-1", Data: map[string]any{"state": "running"}},
			{Kind: wire.EventRolloutChanged, ResourceID: "ro-1", Message: "wave 1 failed", Data: map[string]any{"state": "failed", "failure_code": "gate_timeout"}},
		}, Failed, "rollout failed: gate_timeout: wave 1 failed"},
		{"a node's phase does not end the rollout", ro, []wire.Event{
			{Kind: wire.EventRolloutChanged, ResourceID: "ro-1", NodeID: "node-a", Data: map[string]any{"node_id": "node-a", "phase": "failed", "state": "failed"}},
		}, Waiting, ""},
		{"a pause waits for paused", pause, []wire.Event{
			{Kind: wire.EventRolloutChanged, ResourceID: "ro-1", Data: map[string]any{"state": "paused"}},
		}, Succeeded, ""},
		{"another rollout", ro, []wire.Event{
			{Kind: wire.EventRolloutChanged, ResourceID: "ro-2", Data: map[string]any{"state": "succeeded"}},
		}, Waiting, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o Observation
			for _, ev := range tt.events {
				o.Apply(tt.target, ev)
			}
			got, why := Decide(tt.target, o)
			if got != tt.want || why != tt.wantWhy {
				t.Fatalf("Decide = %v %q; want %v %q (observation %+v)", got, why, tt.want, tt.wantWhy, o)
			}
		})
	}
}

func TestProgressShowsEachStateOnce(t *testing.T) {
	var p progress
	for _, s := range []string{"pending", "applying", "pending", "applying", "", "in_sync"} {
		p.note(s)
	}
	if got := p.String(); got != "pending → applying → in_sync" {
		t.Fatalf("progress %q", got)
	}
}

func TestReadSSE(t *testing.T) {
	in := "retry: 2000\n\n" +
		": keep-alive\n\n" +
		"id: 7\nevent: convergence_changed\ndata: {\"id\":7,\"kind\":\"convergence_changed\",\"node_id\":\"node-a\"}\n\n" +
		"event: resync\ndata: {\"oldest_id\": 3}\n\n" +
		"id: 8\r\nevent: intent_accepted\r\ndata: {\"id\":8,\"kind\":\"intent_accepted\"}\r\n\r\n"
	var got []wire.Event
	err := readSSE(bufio.NewReader(strings.NewReader(in)), func(b sseBlock) bool {
		if ev, ok := b.event(); ok {
			got = append(got, ev)
		}
		return true
	})
	if err == nil {
		t.Fatal("the end of the stream is no error")
	}
	want := []wire.Event{{ID: 7, Kind: "convergence_changed", NodeID: "node-a"}, {Kind: kindResync}, {ID: 8, Kind: "intent_accepted"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}
