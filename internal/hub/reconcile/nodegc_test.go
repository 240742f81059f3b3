package reconcile

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNodesToForget(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start.Add(48 * time.Hour)
	day := 24 * time.Hour
	tests := []struct {
		name  string
		nodes []GCNode
		after time.Duration
		want  []string
	}{
		{"gone long, nothing held", []GCNode{{NodeID: "a", LastSeen: now.Add(-25 * time.Hour)}}, day, []string{"a"}},
		{"gone exactly after: kept", []GCNode{{NodeID: "a", LastSeen: now.Add(-day)}}, day, nil},
		{"gone not long enough", []GCNode{{NodeID: "a", LastSeen: now.Add(-time.Hour)}}, day, nil},
		{"holds desired state", []GCNode{{NodeID: "a", LastSeen: now.Add(-47 * time.Hour), HoldsState: true}}, day, nil},
		{"online", []GCNode{{NodeID: "a", Online: true, LastSeen: now.Add(-47 * time.Hour)}}, day, nil},
		{"disabled", []GCNode{{NodeID: "a", LastSeen: now.Add(-47 * time.Hour)}}, 0, nil},
		{"never seen by this Hub: counted from its start", []GCNode{{NodeID: "a"}}, day, []string{"a"}},
		{"never seen, Hub started recently", []GCNode{{NodeID: "a"}}, 72 * time.Hour, nil},
		{"sorted, mixed", []GCNode{
			{NodeID: "c", LastSeen: now.Add(-30 * time.Hour)},
			{NodeID: "b", LastSeen: now.Add(-30 * time.Hour), HoldsState: true},
			{NodeID: "a", LastSeen: now.Add(-30 * time.Hour)},
		}, day, []string{"a", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NodesToForget(tt.nodes, now, start, tt.after)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NodesToForget (-want +got):\n%s", diff)
			}
		})
	}
}
