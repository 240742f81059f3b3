package input

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

// checkRescales runs an input split over a random sequence of
// parallelisms: at each stage every subtask reads a random number of
// batches and records its position; the next stage's subtasks start from
// Rescale of those positions (nil for a subtask of the first stage that
// read nothing: the kernel then recorded none; a restored subtask records
// the position it resumed from); the last stage reads to
// the end. Every number first..last is read exactly once over all stages.
func checkRescales(ctx context.Context, rt *rapid.T, newIn func(subtask, subtasks int) component.Input, number func(*message.Message) int64, first, last int64) {
	stages := rapid.SliceOfN(rapid.IntRange(1, 5), 2, 4).Draw(rt, "parallelisms")
	seen := map[int64]int{}
	var old [][]byte
	for si, n := range stages {
		next := make([][]byte, n)
		for i := range n {
			in := newIn(i, n)
			if si > 0 {
				pos, err := in.(component.Rescalable).Rescale(old)
				if err != nil {
					rt.Fatalf("stage %d subtask %d of %d: Rescale: %v", si, i, n, err)
				}
				if err := in.(component.Replayable).Seek(ctx, pos); err != nil {
					rt.Fatalf("stage %d subtask %d of %d: Seek(%s): %v", si, i, n, pos, err)
				}
			}
			reads := 1000
			if si < len(stages)-1 {
				reads = rapid.IntRange(0, 6).Draw(rt, "reads")
			}
			ended := false
			for range reads {
				b, _, err := in.Read(ctx)
				if errors.Is(err, message.ErrEndOfInput) {
					ended = true
					break
				}
				if err != nil {
					rt.Fatal(err)
				}
				for k := range b.Messages {
					seen[number(&b.Messages[k])]++
				}
			}
			if si == len(stages)-1 && !ended {
				rt.Fatalf("subtask %d of %d did not end", i, n)
			}
			if si == 0 && reads == 0 && rapid.Bool().Draw(rt, "no position") {
				continue
			}
			pos, err := in.(component.Replayable).Position()
			if err != nil {
				rt.Fatal(err)
			}
			next[i] = pos
		}
		old = next
	}
	for x := first; x <= last; x++ {
		if seen[x] != 1 {
			rt.Fatalf("number %d read %d times over parallelisms %v", x, seen[x], stages)
		}
	}
	if len(seen) != int(last-first+1) {
		rt.Fatalf("%d distinct numbers read, want %d (parallelisms %v)", len(seen), last-first+1, stages)
	}
}

func TestGenerateRescaleProperty(t *testing.T) {
	ctx := testCtx(t)
	rapid.Check(t, func(rt *rapid.T) {
		count := rapid.IntRange(1, 80).Draw(rt, "count")
		conf := map[string]any{
			"context":  `{{count}}:{{random:100}}`,
			"interval": "0s", "count": float64(count), "seed": float64(3),
			"batch_size": float64(rapid.IntRange(1, 7).Draw(rt, "batch")),
		}
		newIn := func(i, n int) component.Input {
			in, err := NewGenerate(conf, component.Resources{})
			if err != nil {
				rt.Fatal(err)
			}
			if err := in.(component.Splittable).Split(i, n); err != nil {
				rt.Fatal(err)
			}
			return in
		}
		seq := func(m *message.Message) int64 {
			p, _ := m.Payload()
			s := string(p)
			n, err := strconv.ParseInt(s[:strings.IndexByte(s, ':')], 10, 64)
			if err != nil {
				rt.Fatal(err)
			}
			return n
		}
		checkRescales(ctx, rt, newIn, seq, 1, int64(count))
	})
}

func TestNexmarkRescaleProperty(t *testing.T) {
	ctx := testCtx(t)
	rapid.Check(t, func(rt *rapid.T) {
		count := rapid.IntRange(1, 80).Draw(rt, "count")
		conf := nexmarkConf(count, 5)
		conf["batch_size"] = float64(rapid.IntRange(1, 7).Draw(rt, "batch"))
		newIn := func(i, n int) component.Input {
			in, err := NewNexmark(conf, component.Resources{})
			if err != nil {
				rt.Fatal(err)
			}
			if err := in.(component.Splittable).Split(i, n); err != nil {
				rt.Fatal(err)
			}
			return in
		}
		checkRescales(ctx, rt, newIn, func(m *message.Message) int64 { return m.Meta.Offset }, 0, int64(count-1))
	})
}

// TestGenerateRescaleKeepsPayloads: a seeded generate rescaled from 2 to 3
// subtasks emits the payloads of an unsplit run, catch-up lanes first.
func TestGenerateRescaleKeepsPayloads(t *testing.T) {
	ctx := testCtx(t)
	conf := genConf(40, float64(9))
	want := genAll(t, conf, 0, 1)
	var got []string
	old := make([][]byte, 2)
	for i, reads := range []int{3, 1} {
		in := build(t, "generate", conf)
		if err := in.(component.Splittable).Split(i, 2); err != nil {
			t.Fatal(err)
		}
		for range reads {
			b, _, err := in.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, payloadsOf(t, b)...)
		}
		var err error
		if old[i], err = in.(component.Replayable).Position(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		in := build(t, "generate", conf)
		if err := in.(component.Splittable).Split(i, 3); err != nil {
			t.Fatal(err)
		}
		pos, err := in.(component.Rescalable).Rescale(old)
		if err != nil {
			t.Fatal(err)
		}
		if err := in.(component.Replayable).Seek(ctx, pos); err != nil {
			t.Fatal(err)
		}
		tail, _ := drain(t, ctx, in, 100)
		got = append(got, tail...)
	}
	slices.SortFunc(got, func(a, b string) int { return idOf(t, a) - idOf(t, b) })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rescaled 2 to 3 (-unsplit +got):\n%s", diff)
	}
}

func TestMemoryRescaleProperty(t *testing.T) {
	ctx := testCtx(t)
	rapid.Check(t, func(rt *rapid.T) {
		count := rapid.IntRange(0, 40).Draw(rt, "count")
		msgs := make([]any, count)
		for i := range msgs {
			msgs[i] = strconv.Itoa(i)
		}
		conf := map[string]any{"messages": msgs, "batch_size": float64(rapid.IntRange(1, 5).Draw(rt, "batch"))}
		newIn := func(i, n int) component.Input {
			in, err := NewMemory(conf, component.Resources{})
			if err != nil {
				rt.Fatal(err)
			}
			if err := in.(component.Splittable).Split(i, n); err != nil {
				rt.Fatal(err)
			}
			return in
		}
		index := func(m *message.Message) int64 {
			p, _ := m.Payload()
			n, err := strconv.ParseInt(string(p), 10, 64)
			if err != nil || n != m.Meta.Offset {
				rt.Fatalf("message %q has offset %d", p, m.Meta.Offset)
			}
			return n
		}
		checkRescales(ctx, rt, newIn, index, 0, int64(count-1))
	})
}
