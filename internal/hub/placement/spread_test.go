package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSpread(t *testing.T) {
	tests := []struct {
		name          string
		before, after []string
		node          string
		peers, fences []string
	}{
		{"create colocated", nil, []string{"n1"}, "n1", nil, nil},
		{"write in place", []string{"n1"}, []string{"n1"}, "n1", nil, nil},
		{"move colocated", []string{"n1"}, []string{"n2"}, "n2", nil, []string{"n1"}},
		{"create split", nil, []string{"n1", "n2", "n3"}, "n2", []string{"n1", "n3"}, nil},
		{"write to a split job", []string{"n1", "n2"}, []string{"n1", "n2"}, "n1", []string{"n2"}, nil},
		{"colocated to split keeps the old node", []string{"n1"}, []string{"n1", "n2"}, "n2", []string{"n1"}, nil},
		{"split to colocated fences the rest", []string{"n1", "n2", "n3"}, []string{"n2"}, "n2", nil, []string{"n1", "n3"}},
		{"split moved off every node", []string{"n1", "n2"}, []string{"n3", "n4"}, "n3", []string{"n4"}, []string{"n1", "n2"}},
		{"fences in the order of before", []string{"n9", "n1", "n5"}, []string{"n5"}, "n5", nil, []string{"n9", "n1"}},
		{"node outside after: every node of after is a peer", []string{"n1"}, []string{"n1", "n2"}, "n3", []string{"n1", "n2"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			peers, fences := Spread(tc.before, tc.after, tc.node)
			if diff := cmp.Diff(tc.peers, peers); diff != "" {
				t.Errorf("peers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.fences, fences); diff != "" {
				t.Errorf("fences (-want +got):\n%s", diff)
			}
		})
	}
}
