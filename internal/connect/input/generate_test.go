package input

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/message"
)

func TestGenerateExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindInput, "generate")
	in := build(t, "generate", conf)
	ctx := testCtx(t)
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
	got, _ := drain(t, ctx, in, 100)
	if len(got) != 5 {
		t.Fatalf("example emitted %d messages, want 5: %q", len(got), got)
	}
	for i, p := range got {
		var v struct{ ID, V int }
		if err := json.Unmarshal([]byte(p), &v); err != nil {
			t.Fatalf("message %d %q: %v", i, p, err)
		}
		if v.ID != i+1 {
			t.Errorf("message %d has id %d", i, v.ID)
		}
	}
}

func TestGenerateCountAndBatchSize(t *testing.T) {
	tests := []struct {
		name      string
		count     int
		batchSize int
		wantSizes []int
	}{
		{"one per batch", 3, 1, []int{1, 1, 1}},
		{"last batch short", 5, 2, []int{2, 2, 1}},
		{"batch larger than count", 2, 10, []int{2}},
		{"exact", 4, 2, []int{2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := build(t, "generate", map[string]any{
				"context": `{"id": {{count}}}`, "interval": "0s",
				"count": float64(tt.count), "batch_size": float64(tt.batchSize),
			})
			got, sizes := drain(t, testCtx(t), in, 100)
			if diff := cmp.Diff(tt.wantSizes, sizes); diff != "" {
				t.Errorf("batch sizes (-want +got):\n%s", diff)
			}
			var want []string
			for i := 1; i <= tt.count; i++ {
				want = append(want, `{"id": `+strconv.Itoa(i)+`}`)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("payloads (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGenerateUnlimited(t *testing.T) {
	in := build(t, "generate", map[string]any{"context": "x", "interval": "0s", "batch_size": float64(7)})
	ctx := testCtx(t)
	for i := range 50 {
		b, _, err := in.Read(ctx)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if b.Len() != 7 {
			t.Fatalf("read %d: batch of %d, want 7", i, b.Len())
		}
	}
}

func TestGenerateStaticPayloadIsShared(t *testing.T) {
	in := build(t, "generate", map[string]any{"context": `{"a":1}`, "interval": "0s", "batch_size": float64(3)})
	b, _, err := in.Read(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := b.Messages[0].Payload()
	p2, _ := b.Messages[2].Payload()
	if string(p0) != `{"a":1}` || &p0[0] != &p2[0] {
		t.Errorf("payloads %q and %q are not the same shared bytes", p0, p2)
	}
}

func TestTemplate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		in     string
		seq    int64
		want   string // with {{random}} expected as R
		static bool
	}{
		{`{"a":1}`, 1, `{"a":1}`, true},
		{`{{count}}`, 42, `42`, false},
		{`{"id": {{count}}, "n": "{{count}}"}`, 7, `{"id": 7, "n": "7"}`, false},
		{`{{nope}} {{count`, 3, `{{nope}} {{count`, true},
		{`{{{count}}}`, 9, `{9}`, false},
		{`pre {{count}} mid {{x}} post`, 123456789012, `pre 123456789012 mid {{x}} post`, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			tm, err := parseTemplate(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if (tm.static != nil) != tt.static {
				t.Fatalf("static = %v, want %v", tm.static != nil, tt.static)
			}
			if tt.static {
				if string(tm.static) != tt.want {
					t.Errorf("static = %q, want %q", tm.static, tt.want)
				}
				return
			}
			got := tm.expand(nil, tt.seq, rng)
			if string(got) != tt.want {
				t.Errorf("expand = %q, want %q", got, tt.want)
			}
			if len(got) > tm.maxLen {
				t.Errorf("expansion of %d bytes exceeds maxLen %d", len(got), tm.maxLen)
			}
		})
	}
}

func TestGenerateRandom(t *testing.T) {
	in := build(t, "generate", map[string]any{
		"context": `{"id": {{count}}, "v": {{random}}}`, "interval": "0s", "count": float64(500), "batch_size": float64(100),
	})
	got, _ := drain(t, testCtx(t), in, 10)
	distinct := map[int]bool{}
	for i, p := range got {
		var v struct{ ID, V int }
		if err := json.Unmarshal([]byte(p), &v); err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if v.ID != i+1 || v.V < 0 || v.V >= 1_000_000 {
			t.Fatalf("message %d = %q: want id %d and 0 <= v < 1000000", i, p, i+1)
		}
		distinct[v.V] = true
	}
	if len(distinct) < 2 {
		t.Errorf("500 random values are all equal")
	}
}

func TestGenerateInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := build(t, "generate", map[string]any{"context": "x", "interval": "1s", "count": float64(3)})
		start := time.Now()
		if _, _, err := in.Read(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("first batch after %v, want at once", d)
		}
		for range 2 {
			if _, _, err := in.Read(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("three batches took %v, want 2s", d)
		}

		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		in2 := build(t, "generate", map[string]any{"context": "x", "interval": "1h"})
		if _, _, err := in2.Read(ctx); err != nil {
			t.Fatal(err)
		}
		if _, _, err := in2.Read(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Read while waiting for the interval = %v, want the context's error", err)
		}
		_ = in2.Close(ctx)
	})
}

func TestGenerateConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		conf map[string]any
	}{
		{"missing context", map[string]any{}},
		{"empty context", map[string]any{"context": ""}},
		{"bad interval", map[string]any{"context": "x", "interval": "soon"}},
		{"negative count", map[string]any{"context": "x", "count": float64(-1)}},
		{"zero batch", map[string]any{"context": "x", "batch_size": float64(0)}},
		{"unknown field", map[string]any{"context": "x", "rate": float64(3)}},
		{"random:0", map[string]any{"context": "{{random:0}}"}},
		{"random:x", map[string]any{"context": "{{random:x}}"}},
		{"random: unclosed", map[string]any{"context": "{{random:5"}},
		{"seed not integer", map[string]any{"context": "x", "seed": 1.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := component.Default.NewInput("generate", tt.conf, component.Resources{}); err == nil {
				t.Error("built without error")
			}
		})
	}
}

func BenchmarkGenerate(b *testing.B) {
	for _, tc := range []struct {
		name    string
		context string
		batch   int
	}{
		{"template/batch=1000", `{"id": {{count}}, "v": {{random}}}`, 1000},
		{"template/batch=1", `{"id": {{count}}, "v": {{random}}}`, 1},
		{"static/batch=1000", `{"id": 1, "v": 2}`, 1000},
		{"static/batch=1", `{"id": 1, "v": 2}`, 1},
	} {
		b.Run(tc.name, func(b *testing.B) {
			in, err := NewGenerate(map[string]any{
				"context": tc.context, "interval": "0s", "batch_size": float64(tc.batch),
			}, component.Resources{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := in.Read(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*tc.batch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

func TestTemplatePlaceholders(t *testing.T) {
	tm, err := parseTemplate(`{{count}} {{timestamp_ms}} {{random:1}} {{random:7}}`)
	if err != nil {
		t.Fatal(err)
	}
	tm.tsStart, tm.tsStep = 1000, 10
	tm.seeded, tm.seed = true, 5
	for seq := int64(1); seq <= 200; seq++ {
		got := string(tm.expand(nil, seq, nil))
		var c, ts, r1, r7 int64
		if _, err := fmt.Sscanf(got, "%d %d %d %d", &c, &ts, &r1, &r7); err != nil {
			t.Fatalf("%q: %v", got, err)
		}
		if c != seq || ts != 1000+(seq-1)*10 || r1 != 0 || r7 < 0 || r7 >= 7 {
			t.Fatalf("seq %d expanded to %q", seq, got)
		}
		if len(got) > tm.maxLen {
			t.Fatalf("expansion of %d bytes exceeds maxLen %d", len(got), tm.maxLen)
		}
	}
}

// TestTimestampFractionalStep: a step below 1 ms puts several messages in
// one millisecond, floor((count-1) * step) after the start.
func TestTimestampFractionalStep(t *testing.T) {
	tm, err := parseTemplate(`{{timestamp_ms}}`)
	if err != nil {
		t.Fatal(err)
	}
	tm.tsStart, tm.tsStep = 5000, 0.25
	for _, tc := range []struct{ seq, want int64 }{{1, 5000}, {4, 5000}, {5, 5001}, {9, 5002}, {401, 5100}} {
		if got := string(tm.expand(nil, tc.seq, nil)); got != strconv.FormatInt(tc.want, 10) {
			t.Errorf("seq %d: {{timestamp_ms}} = %s, want %d", tc.seq, got, tc.want)
		}
	}
}

// genAll reads a generate input to its end and returns the payloads.
func genAll(t *testing.T, conf map[string]any, subtask, subtasks int) []string {
	t.Helper()
	in := build(t, "generate", conf)
	if err := in.(component.Splittable).Split(subtask, subtasks); err != nil {
		t.Fatal(err)
	}
	got, _ := drain(t, testCtx(t), in, 1000)
	return got
}

func genConf(count int, seed any) map[string]any {
	c := map[string]any{
		"context":  `{"id":{{count}},"r":{{random}},"k":{{random:13}},"ts":{{timestamp_ms}}}`,
		"interval": "0s", "count": float64(count), "batch_size": float64(4),
	}
	if seed != nil {
		c["seed"] = seed
	}
	return c
}

func TestGenerateSeedIsDeterministic(t *testing.T) {
	a := genAll(t, genConf(50, float64(7)), 0, 1)
	b := genAll(t, genConf(50, float64(7)), 0, 1)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two runs with one seed differ (-a +b):\n%s", diff)
	}
	c := genAll(t, genConf(50, float64(8)), 0, 1)
	if cmp.Equal(a, c) {
		t.Error("seeds 7 and 8 produced the same payloads")
	}
}

func TestGenerateSplitUnionIsUnsplit(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7} {
		for _, count := range []int{1, 5, 22} {
			want := genAll(t, genConf(count, float64(3)), 0, 1)
			var got []string
			for i := range n {
				part := genAll(t, genConf(count, float64(3)), i, n)
				for j, p := range part {
					var v struct{ ID int }
					if err := json.Unmarshal([]byte(p), &v); err != nil {
						t.Fatal(err)
					}
					if (v.ID-1)%n != i || v.ID != i+1+j*n {
						t.Fatalf("n=%d subtask %d message %d has id %d", n, i, j, v.ID)
					}
				}
				got = append(got, part...)
			}
			slices.SortFunc(got, func(a, b string) int { return idOf(t, a) - idOf(t, b) })
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("n=%d count=%d: union of the splits (-unsplit +union):\n%s", n, count, diff)
			}
		}
	}
}

func idOf(t *testing.T, p string) int {
	var v struct{ ID int }
	if err := json.Unmarshal([]byte(p), &v); err != nil {
		t.Fatal(err)
	}
	return v.ID
}

func TestGenerateSeekContinues(t *testing.T) {
	for _, n := range []int{1, 3} {
		all := genAll(t, genConf(30, float64(1)), n-1, n)
		ctx := testCtx(t)
		in := build(t, "generate", genConf(30, float64(1)))
		r := in.(component.Replayable)
		if err := in.(component.Splittable).Split(n-1, n); err != nil {
			t.Fatal(err)
		}
		b, _, err := in.Read(ctx) // 4 messages
		if err != nil {
			t.Fatal(err)
		}
		pos, err := r.Position()
		if err != nil {
			t.Fatal(err)
		}
		in2 := build(t, "generate", genConf(30, float64(1)))
		if err := in2.(component.Splittable).Split(n-1, n); err != nil {
			t.Fatal(err)
		}
		if err := in2.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		if err := in2.(component.Replayable).Seek(ctx, pos); err != nil {
			t.Fatal(err)
		}
		tail, _ := drain(t, ctx, in2, 100)
		got := append(payloadsOf(t, b), tail...)
		if diff := cmp.Diff(all, got); diff != "" {
			t.Errorf("n=%d: read, Position, Seek in a new instance (-want +got):\n%s", n, diff)
		}
	}
}

func TestGenerateSeekErrors(t *testing.T) {
	in := build(t, "generate", genConf(3, nil)).(component.Replayable)
	for _, pos := range []string{`x`, `{"emitted":-1}`} {
		if err := in.Seek(testCtx(t), []byte(pos)); err == nil {
			t.Errorf("Seek(%s) succeeded", pos)
		}
	}
	if err := in.(component.Splittable).Split(2, 2); err == nil {
		t.Error("Split(2, 2) succeeded")
	}
}

// TestGenerateSplitSeekProperty: for any count, parallelism, batch size and
// checkpoint moment per subtask, the subtasks' messages before the
// checkpoint plus those after a Seek in fresh instances are exactly the
// unsplit run's.
func TestGenerateSplitSeekProperty(t *testing.T) {
	ctx := testCtx(t)
	rapid.Check(t, func(rt *rapid.T) {
		count := rapid.IntRange(1, 60).Draw(rt, "count")
		n := rapid.IntRange(1, 6).Draw(rt, "n")
		batch := rapid.IntRange(1, 7).Draw(rt, "batch")
		conf := map[string]any{
			"context":  `{{count}}:{{random:100}}:{{timestamp_ms}}`,
			"interval": "0s", "count": float64(count), "batch_size": float64(batch), "seed": float64(11),
		}
		newGen := func(i, n int) component.Input {
			in, err := NewGenerate(conf, component.Resources{})
			if err != nil {
				rt.Fatal(err)
			}
			if err := in.(component.Splittable).Split(i, n); err != nil {
				rt.Fatal(err)
			}
			return in
		}
		readAll := func(in component.Input, maxBatches int) (out []string) {
			for range maxBatches {
				b, _, err := in.Read(ctx)
				if errors.Is(err, message.ErrEndOfInput) {
					return out
				}
				if err != nil {
					rt.Fatal(err)
				}
				for i := range b.Messages {
					p, _ := b.Messages[i].Payload()
					out = append(out, string(p))
				}
			}
			return out
		}
		want := readAll(newGen(0, 1), 1000)
		if len(want) != count {
			rt.Fatalf("unsplit run emitted %d messages, want %d", len(want), count)
		}
		got := make([]string, count)
		for i := range n {
			in := newGen(i, n)
			cut := rapid.IntRange(0, count/batch+1).Draw(rt, "cut")
			head := readAll(in, cut)
			pos, err := in.(component.Replayable).Position()
			if err != nil {
				rt.Fatal(err)
			}
			again := newGen(i, n)
			if err := again.(component.Replayable).Seek(ctx, pos); err != nil {
				rt.Fatal(err)
			}
			for _, p := range append(head, readAll(again, 1000)...) {
				seq, _ := strconv.Atoi(p[:strings.IndexByte(p, ':')])
				if seq < 1 || seq > count || (seq-1)%n != i || got[seq-1] != "" {
					rt.Fatalf("subtask %d of %d emitted %q", i, n, p)
				}
				got[seq-1] = p
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			rt.Fatalf("split and resumed (-unsplit +got):\n%s", diff)
		}
	})
}
