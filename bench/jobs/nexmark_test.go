package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/goccy/go-json"
	"github.com/google/go-cmp/cmp"
)

// TestNexmarkQueries runs each query's job on a small stream at parallelism
// 1 and 2 and checks its output against a reference computed here straight
// from the generated events.
func TestNexmarkQueries(t *testing.T) {
	const events = 20_000
	evs := nexmarkEvents(t, events)
	refs := map[string]func([]map[string]any) []string{
		"q0": refQ0, "q1": refQ1, "q2": refQ2, "q5": refQ5, "q7": refQ7,
	}
	templates = "."
	for _, q := range []string{"q0", "q1", "q2", "q5", "q7"} {
		want := refs[q](evs)
		if len(want) == 0 {
			t.Fatalf("%s: the reference is empty; the test would prove nothing", q)
		}
		for _, par := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/p%d", q, par), func(t *testing.T) {
				dir := t.TempDir()
				out := filepath.Join(dir, "out.jsonl")
				p, err := plan(filepath.Join("nexmark", q+".yaml"), map[string]string{
					"EVENTS": strconv.Itoa(events), "PARALLELISM": strconv.Itoa(par),
					"SINK": "file", "SINK_CONFIG": fmt.Sprintf("{path: %q}", out),
				})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := run(p, filepath.Join(dir, "state")); err != nil {
					t.Fatal(err)
				}
				// In a job the file output writes committed part files
				// out-<operator>-<subtask>-<checkpoint>.jsonl.
				got := canonicalLines(t, filepath.Join(dir, "out-*.jsonl"))
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s output differs from the reference (-want +got), %d vs %d lines:\n%s", q, len(want), len(got), firstLines(diff, 40))
				}
			})
		}
	}
}

// nexmarkEvents reads the events the queries' source generates.
func nexmarkEvents(t *testing.T, n int) []map[string]any {
	t.Helper()
	in, err := component.Default.NewInput("nexmark", map[string]any{"count": n, "seed": 1}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
	var evs []map[string]any
	for range n + 1 {
		b, _, err := in.Read(ctx)
		if errors.Is(err, message.ErrEndOfInput) {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Messages {
			v, err := b.Messages[i].Structured()
			if err != nil {
				t.Fatal(err)
			}
			// Round-trip through JSON: the job's sink writes JSON.
			raw, _ := json.Marshal(v)
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, m)
		}
	}
	t.Fatal("the nexmark input never ended")
	return nil
}

// canon is the sorted-key JSON of a value.
func canon(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// canonicalLines reads the JSON-lines files matching pattern into sorted
// canonical lines.
func canonicalLines(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no files match %s (%v)", pattern, err)
	}
	var lines []string
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var v any
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Fatalf("%s: %q: %v", name, sc.Text(), err)
			}
			lines = append(lines, canon(v))
		}
		f.Close()
	}
	sort.Strings(lines)
	return lines
}

func sorted(lines []string) []string { sort.Strings(lines); return lines }

func bids(evs []map[string]any) []map[string]any {
	var out []map[string]any
	for _, e := range evs {
		if e["event_type"] == "bid" {
			out = append(out, e["bid"].(map[string]any))
		}
	}
	return out
}

func refQ0(evs []map[string]any) []string {
	var out []string
	for _, e := range evs {
		out = append(out, canon(e))
	}
	return sorted(out)
}

func refQ1(evs []map[string]any) []string {
	var out []string
	for _, b := range bids(evs) {
		out = append(out, canon(map[string]any{
			"auction": b["auction"], "bidder": b["bidder"], "price": b["price"].(float64) * 0.908, "date_time": b["date_time"],
		}))
	}
	return sorted(out)
}

func refQ2(evs []map[string]any) []string {
	var out []string
	for _, b := range bids(evs) {
		if int64(b["auction"].(float64))%123 == 0 {
			out = append(out, canon(map[string]any{"auction": b["auction"], "price": b["price"]}))
		}
	}
	return sorted(out)
}

// refQ5: bids per auction in 10 s windows sliding by 2 s, then the highest
// count of each window, keyed (and tumbled over 2 s) by the window's end.
func refQ5(evs []map[string]any) []string {
	const size, slide = 10_000, 2_000
	type aw struct{ auction, start int64 }
	counts := map[aw]int64{}
	for _, b := range bids(evs) {
		ts := int64(b["date_time"].(float64))
		last := ts - ts%slide
		for s := last; s > ts-size; s -= slide {
			counts[aw{int64(b["auction"].(float64)), s}]++
		}
	}
	best := map[int64]int64{} // window end -> max count
	for k, n := range counts {
		end := k.start + size
		best[end] = max(best[end], n)
	}
	var out []string
	for end, n := range best {
		out = append(out, canon(map[string]any{"key": end, "window_start": end - slide, "window_end": end, "max_bids": n}))
	}
	return sorted(out)
}

// refQ7: the highest bid price of each 10 s tumbling window.
func refQ7(evs []map[string]any) []string {
	const size = 10_000
	best := map[int64]float64{}
	for _, b := range bids(evs) {
		ts := int64(b["date_time"].(float64))
		start := ts - ts%size
		if p := b["price"].(float64); p > best[start] {
			best[start] = p
		}
	}
	var out []string
	for start, p := range best {
		out = append(out, canon(map[string]any{"key": "all", "window_start": start, "window_end": start + size, "max_price": p}))
	}
	return sorted(out)
}

func firstLines(s string, n int) string {
	lines := 0
	for i, c := range s {
		if c == '\n' {
			lines++
			if lines == n {
				return s[:i] + "\n..."
			}
		}
	}
	return s
}
