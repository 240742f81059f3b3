package ctl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/wire"
)

func TestTableRender(t *testing.T) {
	tab := &table{header: []string{"NODE", "STREAM", "STATE"}, wide: []string{"LAST ERROR"}}
	tab.add("node-a", "orders", "running", "")
	tab.add("node-bb", "audit-stream", "", "line one\nline two")
	tests := []struct {
		wide bool
		want string
	}{
		{false, "" +
			"NODE     STREAM        STATE\n" +
			"node-a   orders        running\n" +
			"node-bb  audit-stream  -\n"},
		{true, "" +
			"NODE     STREAM        STATE    LAST ERROR\n" +
			"node-a   orders        running  -\n" +
			"node-bb  audit-stream  -        line one line two\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := tab.render(&b, tt.wide); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, b.String()); diff != "" {
			t.Errorf("wide=%t (-want +got):\n%s", tt.wide, diff)
		}
	}
}

func TestStreamsTable(t *testing.T) {
	items := []wire.Stream{{ID: "orders", NodeID: "node-a", Convergence: "in_sync",
		Desired:  wire.StreamDesired{State: "stopped", Generation: 3},
		Observed: wire.StreamObserved{State: "stopped", Generation: 3}}}
	var b bytes.Buffer
	if err := streamsTable(items, time.Now()).render(&b, false); err != nil {
		t.Fatal(err)
	}
	want := "NODE    STREAM  DESIRED  OBSERVED  CONVERGENCE  GENERATION\n" +
		"node-a  orders  stopped  stopped   in_sync      3\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestCleanBoundsACell(t *testing.T) {
	long := strings.Repeat("x", 200)
	if got := []rune(clean(long)); len(got) != 80 || got[79] != '…' {
		t.Fatalf("clean of 200 characters: %d runes, want 80 ending in …", len(got))
	}
}

func TestEncodeYAMLKeepsJSONNames(t *testing.T) {
	var b bytes.Buffer
	if err := encode(&b, outYAML, wire.StreamDesired{State: "running", Generation: 2}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"state: running", "generation: 2", "config_version: \"\""} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("YAML %q lacks %q", b.String(), want)
		}
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		at   time.Time
		want string
	}{
		{time.Time{}, ""},
		{now.Add(-5 * time.Second), "5s"},
		{now.Add(-3 * time.Minute), "3m"},
		{now.Add(-5 * time.Hour), "5h"},
		{now.Add(-72 * time.Hour), "3d"},
		{now.Add(time.Second), "0s"},
	}
	for _, tt := range tests {
		if got := age(wire.At(tt.at), now); got != tt.want {
			t.Errorf("age(%v) = %q, want %q", tt.at, got, tt.want)
		}
	}
}
