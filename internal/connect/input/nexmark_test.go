package input

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/message"
)

// nexmarkEvent is one event with its event number.
type nexmarkEvent struct {
	N  int64
	Ev map[string]any
}

func nexmarkConf(count int, seed int) map[string]any {
	return map[string]any{"count": float64(count), "seed": float64(seed), "batch_size": float64(64)}
}

// nexmarkRead builds a nexmark input, splits it, seeks it when pos is not
// nil, and reads it to its end.
func nexmarkRead(t *testing.T, conf map[string]any, subtask, subtasks int, pos []byte) []nexmarkEvent {
	t.Helper()
	ctx := testCtx(t)
	in := build(t, "nexmark", conf)
	if err := in.(component.Splittable).Split(subtask, subtasks); err != nil {
		t.Fatal(err)
	}
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if pos != nil {
		if err := in.(component.Replayable).Seek(ctx, pos); err != nil {
			t.Fatal(err)
		}
	}
	var out []nexmarkEvent
	for range 100_000 {
		b, _, err := in.Read(ctx)
		if errors.Is(err, message.ErrEndOfInput) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Messages {
			if !b.Messages[i].HasStructured() {
				t.Fatal("a nexmark message is not structured")
			}
			v, err := b.Messages[i].Structured()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, nexmarkEvent{N: b.Messages[i].Meta.Offset, Ev: v.(map[string]any)})
		}
	}
	t.Fatal("no end of input")
	return nil
}

func TestNexmarkExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindInput, "nexmark")
	if got := nexmarkRead(t, conf, 0, 1, nil); len(got) != 1000 {
		t.Errorf("example generated %d events, want 1000", len(got))
	}
}

func TestNexmarkMixAndModel(t *testing.T) {
	const count = 5000
	events := nexmarkRead(t, nexmarkConf(count, 1), 0, 1, nil)
	if len(events) != count {
		t.Fatalf("%d events, want %d", len(events), count)
	}
	kinds := map[string]int{}
	var people, auctions int
	hotAuctionBids := 0
	for i, e := range events {
		if e.N != int64(i) {
			t.Fatalf("event %d has number %d", i, e.N)
		}
		typ := e.Ev["event_type"].(string)
		kinds[typ]++
		dt := e.Ev["date_time"].(float64)
		if want := float64(1_700_000_000_000 + int64(i)/10); dt != want {
			t.Fatalf("event %d at %v, want %v", i, dt, want)
		}
		inner := e.Ev[typ].(map[string]any)
		if inner["date_time"].(float64) != dt {
			t.Fatalf("event %d: inner date_time %v differs", i, inner["date_time"])
		}
		// The JSON round trip keeps every value: the types are JSON's.
		j, err := json.Marshal(e.Ev)
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		if err := json.Unmarshal(j, &back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(back, e.Ev); diff != "" {
			t.Fatalf("event %d is not what its JSON decodes to (-json +event):\n%s", i, diff)
		}
		switch typ {
		case "person":
			if id := inner["id"].(float64); id != float64(1000+people) {
				t.Fatalf("person %d has id %v", people, id)
			}
			people++
			if cc := inner["credit_card"].(string); len(cc) != 19 {
				t.Fatalf("credit card %q", cc)
			}
		case "auction":
			if id := inner["id"].(float64); id != float64(1000+auctions) {
				t.Fatalf("auction %d has id %v", auctions, id)
			}
			auctions++
			if c := inner["category"].(float64); c < 10 || c >= 15 {
				t.Fatalf("category %v", c)
			}
			if inner["reserve"].(float64) <= inner["initial_bid"].(float64) || inner["expires"].(float64) <= dt {
				t.Fatalf("auction %v", inner)
			}
			if s := inner["seller"].(float64); s < 1000 || s >= float64(1000+people+10) {
				t.Fatalf("auction %d has seller %v with %d people", i, s, people)
			}
		case "bid":
			a := inner["auction"].(float64)
			if a < 1000 || a >= float64(1000+auctions+10) {
				t.Fatalf("bid %d names auction %v with %d auctions", i, a, auctions)
			}
			if a == 1000 { // the hot auction of the first group of 100
				hotAuctionBids++
			}
			if p := inner["price"].(float64); p < 100 || p > 100_000_000 {
				t.Fatalf("price %v", p)
			}
			if b := inner["bidder"].(float64); b < 1000 || b >= float64(1000+people+10) {
				t.Fatalf("bid %d has bidder %v with %d people", i, b, people)
			}
			if inner["channel"].(string) == "" || inner["url"].(string) == "" {
				t.Fatalf("bid %v", inner)
			}
		}
	}
	if diff := cmp.Diff(map[string]int{"person": 100, "auction": 300, "bid": 4600}, kinds); diff != "" {
		t.Errorf("event mix (-want +got):\n%s", diff)
	}
	// About half the bids go to the hot auction (5000 events hold 300
	// auctions, so the first group of 100 is hot for 1/3 of the bids, and
	// random picks add a few more); far more than a uniform choice would.
	if hotAuctionBids < 4600/10 {
		t.Errorf("%d of 4600 bids name the hot auction 1000", hotAuctionBids)
	}
}

func TestNexmarkDeterministic(t *testing.T) {
	a := nexmarkRead(t, nexmarkConf(500, 7), 0, 1, nil)
	b := nexmarkRead(t, nexmarkConf(500, 7), 0, 1, nil)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two runs with one seed differ (-a +b):\n%s", diff)
	}
	c := nexmarkRead(t, nexmarkConf(500, 8), 0, 1, nil)
	if cmp.Equal(a, c) {
		t.Error("seeds 7 and 8 generated the same events")
	}
}

func TestNexmarkSplitUnion(t *testing.T) {
	const count = 1234
	want := nexmarkRead(t, nexmarkConf(count, 3), 0, 1, nil)
	for _, n := range []int{2, 3, 8} {
		got := make([]nexmarkEvent, count)
		seen := 0
		for i := range n {
			for _, e := range nexmarkRead(t, nexmarkConf(count, 3), i, n, nil) {
				if e.N%int64(n) != int64(i) || got[e.N].Ev != nil {
					t.Fatalf("subtask %d of %d generated event %d", i, n, e.N)
				}
				got[e.N] = e
				seen++
			}
		}
		if seen != count {
			t.Fatalf("n=%d: %d events, want %d", n, seen, count)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("n=%d: union of the splits (-unsplit +union):\n%s", n, diff)
		}
	}
}

func TestNexmarkSeek(t *testing.T) {
	for _, n := range []int{1, 3} {
		conf := nexmarkConf(700, 5)
		all := nexmarkRead(t, conf, n-1, n, nil)
		ctx := testCtx(t)
		in := build(t, "nexmark", conf)
		if err := in.(component.Splittable).Split(n-1, n); err != nil {
			t.Fatal(err)
		}
		read := 0
		for range 2 {
			b, _, err := in.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			read += b.Len()
		}
		pos, err := in.(component.Replayable).Position()
		if err != nil {
			t.Fatal(err)
		}
		tail := nexmarkRead(t, conf, n-1, n, pos)
		if diff := cmp.Diff(all[read:], tail); diff != "" {
			t.Errorf("n=%d: Seek(%s) then read (-want +got):\n%s", n, pos, diff)
		}
	}
}

func TestNexmarkErrors(t *testing.T) {
	for name, conf := range map[string]map[string]any{
		"missing count":  {},
		"zero count":     {"count": float64(0)},
		"zero batch":     {"count": float64(1), "batch_size": float64(0)},
		"zero rate":      {"count": float64(1), "events_per_second": float64(0)},
		"unknown field":  {"count": float64(1), "rate": float64(1)},
		"fraction count": {"count": 1.5},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := component.Default.NewInput("nexmark", conf, component.Resources{}); err == nil {
				t.Error("built without error")
			}
		})
	}
	in := build(t, "nexmark", nexmarkConf(10, 0))
	if err := in.(component.Splittable).Split(3, 3); err == nil {
		t.Error("Split(3, 3) succeeded")
	}
	if err := in.(component.Splittable).Split(1, 3); err != nil {
		t.Fatal(err)
	}
	for _, pos := range []string{`x`, `{"next":-2}`, `{"next":3}`} {
		if err := in.(component.Replayable).Seek(testCtx(t), []byte(pos)); err == nil {
			t.Errorf("Seek(%s) on subtask 1 of 3 succeeded", pos)
		}
	}
}

func BenchmarkNexmark(b *testing.B) {
	in, err := NewNexmark(map[string]any{"count": float64(1 << 62)}, component.Resources{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	events := 0
	for b.Loop() {
		batch, _, err := in.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		events += batch.Len()
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
