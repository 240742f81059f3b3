package input

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/message"
)

func TestMemoryExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindInput, "memory")
	in := build(t, "memory", conf)
	ctx := testCtx(t)
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
	got, sizes := drain(t, ctx, in, 10)
	if diff := cmp.Diff([]string{`{"id": 1}`, `{"id": 2}`}, got); diff != "" {
		t.Errorf("payloads (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{2}, sizes); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
}

func TestMemoryBatches(t *testing.T) {
	tests := []struct {
		name      string
		messages  []any
		batchSize int
		wantSizes []int
	}{
		{"empty", []any{}, 1, nil},
		{"one each", []any{"a", "b", "c"}, 1, []int{1, 1, 1}},
		{"short last", []any{"a", "b", "c"}, 2, []int{2, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := build(t, "memory", map[string]any{"messages": tt.messages, "batch_size": float64(tt.batchSize)})
			got, sizes := drain(t, testCtx(t), in, 10)
			if diff := cmp.Diff(tt.wantSizes, sizes); diff != "" {
				t.Errorf("batch sizes (-want +got):\n%s", diff)
			}
			var want []string
			for _, m := range tt.messages {
				want = append(want, m.(string))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("payloads (-want +got):\n%s", diff)
			}
		})
	}
}

// A batch whose acknowledgement fails is emitted again, unchanged, even when
// a processor rewrote its messages, and the input ends only after that.
func TestMemoryRedeliversFailedBatch(t *testing.T) {
	in := build(t, "memory", map[string]any{"messages": []any{"a", "b"}})
	ctx := testCtx(t)
	b, ack, err := in.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.Messages[0].SetPayload([]byte("rewritten"))
	if err := ack(ctx, errors.New("output down")); err != nil {
		t.Fatal(err)
	}
	got, _ := drain(t, ctx, in, 10)
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("after a failed ack (-want +got):\n%s", diff)
	}

	// After the end, nothing is redelivered (it is logged as lost).
	in2 := build(t, "memory", map[string]any{"messages": []any{"a"}})
	_, ack2, err := in2.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := in2.Read(ctx); !errors.Is(err, message.ErrEndOfInput) {
		t.Fatalf("second Read = %v, want end of input", err)
	}
	_ = ack2(ctx, errors.New("late"))
	if _, _, err := in2.Read(ctx); !errors.Is(err, message.ErrEndOfInput) {
		t.Errorf("Read after a late failure = %v, want end of input", err)
	}
}

func TestMemoryConfigErrors(t *testing.T) {
	for name, conf := range map[string]map[string]any{
		"missing messages": {},
		"zero batch":       {"messages": []any{"a"}, "batch_size": float64(0)},
		"not strings":      {"messages": []any{float64(1)}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := component.Default.NewInput("memory", conf, component.Resources{}); err == nil {
				t.Error("built without error")
			}
		})
	}
}

func TestMemorySplitAndSeek(t *testing.T) {
	msgs := []any{"m0", "m1", "m2", "m3", "m4", "m5", "m6"}
	for _, n := range []int{1, 2, 3, 8} {
		var union []string
		for i := range n {
			in := build(t, "memory", map[string]any{"messages": msgs, "batch_size": float64(2)})
			if err := in.(component.Splittable).Split(i, n); err != nil {
				t.Fatal(err)
			}
			all, _ := drain(t, testCtx(t), in, 10)
			for j, p := range all {
				if want := msgs[i+j*n]; p != want {
					t.Fatalf("n=%d subtask %d message %d = %q, want %q", n, i, j, p, want)
				}
			}
			union = append(union, all...)

			// Seek to every position this instance reports.
			ctx := testCtx(t)
			in = build(t, "memory", map[string]any{"messages": msgs, "batch_size": float64(1)})
			if err := in.(component.Splittable).Split(i, n); err != nil {
				t.Fatal(err)
			}
			for k := 0; k <= len(all); k++ {
				pos, err := in.(component.Replayable).Position()
				if err != nil {
					t.Fatal(err)
				}
				again := build(t, "memory", map[string]any{"messages": msgs, "batch_size": float64(2)})
				if err := again.(component.Splittable).Split(i, n); err != nil {
					t.Fatal(err)
				}
				if err := again.(component.Replayable).Seek(ctx, pos); err != nil {
					t.Fatal(err)
				}
				tail, _ := drain(t, ctx, again, 10)
				if diff := cmp.Diff(all[k:], tail, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("n=%d subtask %d: Seek(%s) (-want +got):\n%s", n, i, pos, diff)
				}
				if k < len(all) {
					if _, _, err := in.Read(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		slices.Sort(union)
		if diff := cmp.Diff([]string{"m0", "m1", "m2", "m3", "m4", "m5", "m6"}, union); diff != "" {
			t.Errorf("n=%d: union of the splits (-want +got):\n%s", n, diff)
		}
	}
}

func TestMemorySeekErrors(t *testing.T) {
	in := build(t, "memory", map[string]any{"messages": []any{"a"}}).(component.Replayable)
	for _, pos := range []string{`[]`, `{"index":-1}`, `{"index":2}`} {
		if err := in.Seek(testCtx(t), []byte(pos)); err == nil {
			t.Errorf("Seek(%s) succeeded", pos)
		}
	}
}
