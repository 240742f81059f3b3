package multi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/stream"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// build builds a multiple_inputs from YAML-ish conf through the registry.
func build(t *testing.T, inputs ...map[string]any) component.Input {
	t.Helper()
	var list []any
	for _, in := range inputs {
		list = append(list, in)
	}
	in, err := component.Default.NewInput("multiple_inputs", map[string]any{"inputs": list}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	return in
}

func memory(msgs ...string) map[string]any {
	l := []any{}
	for _, m := range msgs {
		l = append(l, m)
	}
	return map[string]any{"type": "memory", "messages": l, "batch_size": 2}
}

func payload(t *testing.T, m message.Message) string {
	p, err := m.Payload()
	if err != nil {
		t.Fatal(err)
	}
	return string(p)
}

// TestMergeAcks: the batches of both children all arrive, each message
// tagged with its child's index and keeping its child's metadata; each
// batch carries its child's AckFunc: the probe counts exactly one ack per
// batch, and a failed ack of a memory batch makes memory deliver it again.
func TestMergeAcks(t *testing.T) {
	st := newProbe("merge", &probeState{messages: 5})
	in := build(t, memory("a", "b", "c"), map[string]any{"type": "multi_test_probe", "id": "merge"})
	if err := in.Connect(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	nacked := false
	for range 50 {
		b, ack, err := in.Read(testCtx(t))
		if errors.Is(err, message.ErrEndOfInput) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var ackErr error
		for _, m := range b.Messages {
			if payload(t, m) == "a" && !nacked {
				ackErr = errors.New("output failed") // not delivered: counted when redelivered
			}
		}
		for _, m := range b.Messages {
			idx := m.Meta.Fields["input_index"]
			p := payload(t, m)
			if idx == "1" && m.Meta.Fields["probe"] != "yes" {
				t.Errorf("%s lost the child's metadata: %v", p, m.Meta.Fields)
			}
			if ackErr == nil {
				got[idx+":"+p]++
			}
		}
		nacked = nacked || ackErr != nil
		if err := ack(testCtx(t), ackErr); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{"0:a": 1, "0:b": 1, "0:c": 1}
	for i := 1; i <= 5; i++ {
		want[fmt.Sprintf("1:probe-%d", i)] = 1
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	if !nacked {
		t.Error("the memory batch holding a was never read")
	}
	if _, _, emitted, acks, nacks := st.counts(); emitted != 5 || acks != 5 || nacks != 0 {
		t.Errorf("probe emitted %d, acked %d, nacked %d; want 5, 5, 0", emitted, acks, nacks)
	}
	if _, _, err := in.Read(testCtx(t)); !errors.Is(err, message.ErrEndOfInput) {
		t.Errorf("Read after the end: %v, want ErrEndOfInput", err)
	}
	if err := in.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, closes, _, _, _ := st.counts(); closes != 1 {
		t.Errorf("probe closed %d times, want 1", closes)
	}
}

// TestConnectRetry: a child failing Connect fails the whole Connect,
// naming it; the retry connects only the children not connected yet.
func TestConnectRetry(t *testing.T) {
	ok := newProbe("ok", &probeState{})
	bad := newProbe("bad", &probeState{failConnect: 2})
	in := build(t, map[string]any{"type": "multi_test_probe", "id": "ok"}, map[string]any{"type": "multi_test_probe", "id": "bad"})
	for attempt := range 2 {
		err := in.Connect(testCtx(t))
		if err == nil || !strings.Contains(err.Error(), "inputs[1] (multi_test_probe): probe: refused") || component.IsPermanent(err) {
			t.Fatalf("attempt %d: Connect error %v", attempt, err)
		}
	}
	if err := in.Connect(testCtx(t)); err != nil {
		t.Fatalf("third Connect: %v", err)
	}
	if c, _, _, _, _ := ok.counts(); c != 1 {
		t.Errorf("the healthy child was connected %d times, want 1", c)
	}
	if c, _, _, _, _ := bad.counts(); c != 3 {
		t.Errorf("the failing child was connected %d times, want 3", c)
	}
	if err := in.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*probeState{ok, bad} {
		if _, closes, _, _, _ := st.counts(); closes != 1 {
			t.Errorf("a child was closed %d times, want 1", closes)
		}
	}
}

// TestEndAfterAll: an ended child does not end the input while another
// one still has data.
func TestEndAfterAll(t *testing.T) {
	gate := make(chan struct{})
	newProbe("late", &probeState{messages: 1, gate: gate})
	in := build(t, memory("a", "b", "c", "d"), map[string]any{"type": "multi_test_probe", "id": "late"})
	if err := in.Connect(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// memory's two batches come first: the probe waits for the gate.
	for range 2 {
		b, ack, err := in.Read(testCtx(t))
		if err != nil || b.Messages[0].Meta.Fields["input_index"] != "0" {
			t.Fatalf("Read: %v, %v", b.Messages, err)
		}
		_ = ack(testCtx(t), nil)
	}
	type result struct {
		b   message.Batch
		err error
	}
	res := make(chan result, 1)
	go func() {
		b, _, err := in.Read(testCtx(t))
		res <- result{b, err}
	}()
	close(gate)
	r := <-res
	if r.err != nil || r.b.Len() != 1 || payload(t, r.b.Messages[0]) != "probe-1" {
		t.Fatalf("Read after memory ended: %v, %v; want the probe's batch", r.b.Messages, r.err)
	}
	if _, _, err := in.Read(testCtx(t)); !errors.Is(err, message.ErrEndOfInput) {
		t.Errorf("Read after both ended: %v, want ErrEndOfInput", err)
	}
}

// TestReadError: a child's read error is returned naming the child, and
// the child is read again after it.
func TestReadError(t *testing.T) {
	newProbe("flaky", &probeState{messages: 1, failRead: 1})
	in := build(t, map[string]any{"type": "multi_test_probe", "id": "flaky"})
	if err := in.Connect(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	_, _, err := in.Read(testCtx(t))
	if err == nil || err.Error() != "inputs[0] (multi_test_probe): probe: read failed" {
		t.Fatalf("first Read: %v", err)
	}
	b, _, err := in.Read(testCtx(t))
	if err != nil || b.Len() != 1 {
		t.Fatalf("second Read: %d messages, %v", b.Len(), err)
	}
}

// TestCloseStopsReaders: Close returns while a child's Read waits, and
// closes every child.
func TestCloseStopsReaders(t *testing.T) {
	st := newProbe("blocked", &probeState{messages: 1, gate: make(chan struct{})})
	in := build(t, map[string]any{"type": "multi_test_probe", "id": "blocked"}, memory())
	if err := in.Connect(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, _, err := in.Read(ctx)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Read with its context ended: %v", err)
	}
	if err := in.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, closes, _, _, _ := st.counts(); closes != 1 {
		t.Errorf("probe closed %d times, want 1", closes)
	}
	if _, _, err := in.Read(testCtx(t)); !errors.Is(err, message.ErrEndOfInput) {
		t.Errorf("Read after Close: %v, want ErrEndOfInput", err)
	}
}

// TestConstructorErrors: a child's problem is named by its path, nested
// ones too.
func TestConstructorErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf map[string]any
		want string
	}{
		{"no inputs", map[string]any{"inputs": []any{}}, "inputs: at least one is required"},
		{"no type", map[string]any{"inputs": []any{map[string]any{"messages": []any{}}}}, "inputs[0].type: required"},
		{"unknown type", map[string]any{"inputs": []any{memory(), map[string]any{"type": "memroy"}}}, `inputs[1].type: unknown input "memroy"; did you mean "memory"?`},
		{"bad field", map[string]any{"inputs": []any{memory(), map[string]any{"type": "generate", "context": "x", "interval": "soon"}}}, `inputs[1].interval: "soon" is not`},
		{"nested", map[string]any{"inputs": []any{map[string]any{"type": "multiple_inputs", "inputs": []any{memory(),
			map[string]any{"type": "memory", "messages": []any{}, "batch_size": 0}}}}}, "inputs[0].inputs[1].batch_size: must be at least 1"},
		{"unknown field", map[string]any{"inputs": []any{map[string]any{"type": "memory", "messages": []any{}, "nope": 1}}}, `inputs[0]: json: unknown field "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := component.Default.NewInput("multiple_inputs", tc.conf, component.Resources{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestBadConfig: --validate checks children against their own schema and
// names problems by their full path.
func TestBadConfig(t *testing.T) {
	for _, tc := range []struct{ input, want string }{
		{`{type: multiple_inputs}`, "streams[0].input.inputs: required field is missing"},
		{`{type: multiple_inputs, inputs: []}`, "streams[0].input.inputs:"},
		{`{type: multiple_inputs, inputs: [{type: memory, messages: []}, {type: generate, context: x, count: -1}]}`, "streams[0].input.inputs[1].count:"},
		{`{type: multiple_inputs, inputs: [{type: memory, messages: [], nope: 1}]}`, "streams[0].input.inputs[0].nope:"},
		{`{type: multiple_inputs, inputs: [{type: memroy}]}`, "streams[0].input.inputs[0].type:"},
		{`{type: multiple_inputs, inputs: [{messages: []}]}`, "streams[0].input.inputs[0].type:"},
		{`{type: multiple_inputs, inputs: [{type: multiple_inputs, inputs: [{type: memory, messages: [], batch_size: 0}]}]}`, "streams[0].input.inputs[0].inputs[0].batch_size:"},
	} {
		_, err := componenttest.Materialize(`streams:
  - input: ` + tc.input + `
    pipeline: {processors: []}
    output: {type: drop}
`)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.input, err, tc.want)
		}
	}
	// A valid configuration passes, and its deep build too.
	cfg, err := componenttest.Materialize(`streams:
  - input: {type: multiple_inputs, inputs: [{type: memory, messages: [a]}, {type: generate, context: x, count: 1}]}
    pipeline: {processors: []}
    output: {type: drop}
`)
	if err != nil {
		t.Fatal(err)
	}
	if ps := engine.Check(cfg, component.Default); len(ps) > 0 {
		t.Errorf("deep build: %v", ps)
	}
}

// TestStream: two children merged through a real stream: every message
// of both reaches the file once, and the stream completes when both ended.
func TestStream(t *testing.T) {
	const nMem, nGen = 40, 60
	var msgs []string
	for i := range nMem {
		msgs = append(msgs, fmt.Sprintf(`'{"m":%d}'`, i))
	}
	path := filepath.Join(t.TempDir(), "out.jsonl")
	e := componenttest.Engine(t, fmt.Sprintf(`streams:
  - id: merged
    input:
      type: multiple_inputs
      inputs:
        - {type: memory, batch_size: 3, messages: [%s]}
        - {type: generate, context: '{"g":{{count}}}', interval: 0s, count: %d, batch_size: 7}
    pipeline: {processors: []}
    output: {type: file, path: %s}
`, strings.Join(msgs, ","), nGen, path))
	componenttest.WaitFor(t, "the stream to complete", 20*time.Second, func() bool {
		return componenttest.Stream(t, e, "merged").State == stream.StateCompleted
	})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		seen[l]++
	}
	for i := range nMem {
		if l := fmt.Sprintf(`{"m":%d}`, i); seen[l] != 1 {
			t.Errorf("%s written %d times", l, seen[l])
		}
	}
	for i := 1; i <= nGen; i++ {
		if l := fmt.Sprintf(`{"g":%d}`, i); seen[l] != 1 {
			t.Errorf("%s written %d times", l, seen[l])
		}
	}
	if len(seen) != nMem+nGen {
		t.Errorf("%d distinct lines, want %d", len(seen), nMem+nGen)
	}
	if s := componenttest.Stream(t, e, "merged"); s.Received != nMem+nGen || s.Sent != nMem+nGen {
		t.Errorf("received %d, sent %d; want %d", s.Received, s.Sent, nMem+nGen)
	}
}

// TestExample: the spec's example satisfies the schema and builds.
func TestExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindInput, "multiple_inputs")
	in, err := component.Default.NewInput("multiple_inputs", conf, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	_ = in.Close(context.Background())
}
