package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWaves(t *testing.T) {
	five := []string{"a", "b", "c", "d", "e"}
	tests := []struct {
		name    string
		nodes   []string
		batch   int
		pct     []int
		want    [][]string
		wantErr bool
	}{
		{name: "batch of 2", nodes: five, batch: 2, want: [][]string{{"a", "b"}, {"c", "d"}, {"e"}}},
		{name: "batch larger than nodes", nodes: five, batch: 10, want: [][]string{five}},
		{name: "batch of 1", nodes: []string{"a", "b"}, batch: 1, want: [][]string{{"a"}, {"b"}}},
		{name: "percentages round up", nodes: five, pct: []int{10, 50, 100}, want: [][]string{{"a"}, {"b", "c"}, {"d", "e"}}},
		{name: "empty waves dropped", nodes: []string{"a", "b"}, pct: []int{10, 20, 50, 100}, want: [][]string{{"a"}, {"b"}}},
		{name: "only 100", nodes: five, pct: []int{100}, want: [][]string{five}},
		{name: "ten nodes 10/50/100", nodes: []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}, pct: []int{10, 50, 100},
			want: [][]string{{"0"}, {"1", "2", "3", "4"}, {"5", "6", "7", "8", "9"}}},
		{name: "neither", nodes: five, wantErr: true},
		{name: "both", nodes: five, batch: 2, pct: []int{100}, wantErr: true},
		{name: "negative batch", nodes: five, batch: -1, wantErr: true},
		{name: "no nodes", batch: 1, wantErr: true},
		{name: "empty id", nodes: []string{"a", ""}, batch: 1, wantErr: true},
		{name: "duplicate id", nodes: []string{"a", "a"}, batch: 1, wantErr: true},
		{name: "last not 100", nodes: five, pct: []int{10, 50}, wantErr: true},
		{name: "not increasing", nodes: five, pct: []int{50, 50, 100}, wantErr: true},
		{name: "decreasing", nodes: five, pct: []int{60, 40, 100}, wantErr: true},
		{name: "zero", nodes: five, pct: []int{0, 100}, wantErr: true},
		{name: "above 100", nodes: five, pct: []int{50, 120}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Waves(tt.nodes, tt.batch, tt.pct)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Waves error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Waves (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWavesKeepsInput(t *testing.T) {
	nodes := []string{"a", "b", "c"}
	w, err := Waves(nodes, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	w[0][0] = "x"
	if nodes[0] != "a" {
		t.Errorf("Waves shares its result with its input: nodes[0] = %q", nodes[0])
	}
}
