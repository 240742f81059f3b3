package buffer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	_ "github.com/flowplane/flowplane/internal/connect/all"
	"github.com/flowplane/flowplane/internal/connect/multi"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/stream"
)

const joinQuery = "SELECT orders.order_id, orders.amount, shipments.carrier FROM orders JOIN shipments " +
	"ON orders.order_id = shipments.order_id ORDER BY orders.order_id"

// from is a batch of JSON payloads of the named input.
func from(input string, payloads ...string) message.Batch {
	var b message.Batch
	for _, p := range payloads {
		m := message.New([]byte(p))
		if input != "" {
			m.SetMeta(multi.FieldInputName, input)
		}
		b.Messages = append(b.Messages, m)
	}
	return b
}

func joinBuffer(t testing.TB, query string) component.Buffer {
	t.Helper()
	return newBuffer(t, "session_window", map[string]any{"gap": "1ms",
		"join": map[string]any{"query": query, "codec": map[string]any{"type": "json"}}})
}

// session writes batches (each acknowledged under its own name), waits
// for the session to close, and returns the result's rows as JSON (nil
// for an empty batch), its column names, and the AckFunc.
func session(t *testing.T, buf component.Buffer, a *acks, batches map[string]message.Batch) ([]string, []string, message.AckFunc) {
	t.Helper()
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range batches {
			if !yield(k) {
				return
			}
		}
	}) {
		write(t, buf, batches[name], a.fn(name))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, ack, err := buf.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if b.Table == nil {
		if b.Len() != 0 {
			t.Fatalf("join result without a table: %d messages", b.Len())
		}
		return nil, nil, ack
	}
	rows, err := columnar.ToJSON(b.Table, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out, cols []string
	for _, r := range rows {
		out = append(out, string(r))
	}
	for _, f := range b.Table.Schema().Fields() {
		cols = append(cols, f.Name)
	}
	return out, cols, ack
}

// TestSessionJoin: the messages of a closed session are grouped by input
// name into tables and the query's result is the session's batch,
// acknowledging every input batch; a side the session lacks is an empty
// table with the schema it last had (an inner join: no rows, a left join:
// the left rows), or, before any session had it, makes the session yield
// nothing; messages of an unnamed input take no part.
func TestSessionJoin(t *testing.T) {
	t.Run("both sides", func(t *testing.T) {
		a := newAcks()
		buf := joinBuffer(t, joinQuery)
		rows, cols, ack := session(t, buf, a, map[string]message.Batch{
			"o1":       from("orders", `{"order_id": 2, "amount": 20}`, `{"order_id": 1, "amount": 10}`),
			"o2":       from("orders", `{"order_id": 3, "amount": 30}`),
			"s1":       from("shipments", `{"order_id": 1, "carrier": "rail"}`, `{"order_id": 3, "carrier": "road"}`),
			"unnamed":  from("", `{"order_id": 1, "carrier": "air"}`),
			"shipment": from("shipments", `{"order_id": 9, "carrier": "sea"}`),
		})
		want := []string{`{"order_id":1,"amount":10,"carrier":"rail"}`, `{"order_id":3,"amount":30,"carrier":"road"}`}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"order_id", "amount", "carrier"}, cols); diff != "" {
			t.Errorf("columns (-want +got):\n%s", diff)
		}
		if err := ack(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		wantAcks := map[string][]string{"o1": {"ok"}, "o2": {"ok"}, "s1": {"ok"}, "unnamed": {"ok"}, "shipment": {"ok"}}
		if diff := cmp.Diff(wantAcks, a.snapshot()); diff != "" {
			t.Errorf("acks (-want +got):\n%s", diff)
		}
	})
	t.Run("one side, never both", func(t *testing.T) {
		a := newAcks()
		buf := joinBuffer(t, joinQuery)
		rows, _, ack := session(t, buf, a, map[string]message.Batch{"o": from("orders", `{"order_id": 1, "amount": 10}`)})
		if rows != nil {
			t.Errorf("rows %v, want none", rows)
		}
		if err := ack(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string][]string{"o": {"ok"}}, a.snapshot()); diff != "" {
			t.Errorf("acks (-want +got):\n%s", diff)
		}
	})
	t.Run("one side after both", func(t *testing.T) {
		a := newAcks()
		buf := joinBuffer(t, joinQuery)
		session(t, buf, a, map[string]message.Batch{
			"o": from("orders", `{"order_id": 1, "amount": 10}`), "s": from("shipments", `{"order_id": 1, "carrier": "rail"}`)})
		rows, cols, _ := session(t, buf, a, map[string]message.Batch{"o2": from("orders", `{"order_id": 2, "amount": 20}`)})
		if rows != nil {
			t.Errorf("rows %v, want none", rows)
		}
		if diff := cmp.Diff([]string{"order_id", "amount", "carrier"}, cols); diff != "" {
			t.Errorf("columns of the empty result (-want +got):\n%s", diff)
		}
	})
	t.Run("left join, one side after both", func(t *testing.T) {
		a := newAcks()
		buf := joinBuffer(t, strings.Replace(joinQuery, " JOIN ", " LEFT JOIN ", 1))
		session(t, buf, a, map[string]message.Batch{
			"o": from("orders", `{"order_id": 1, "amount": 10}`), "s": from("shipments", `{"order_id": 1, "carrier": "rail"}`)})
		rows, _, _ := session(t, buf, a, map[string]message.Batch{"o2": from("orders", `{"order_id": 2, "amount": 20}`)})
		if diff := cmp.Diff([]string{`{"order_id":2,"amount":20,"carrier":null}`}, rows); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
	})
}

// TestSessionJoinFailure: a payload the codec rejects fails the session:
// Read returns the error and every input batch of the session is
// negatively acknowledged with it; the next session joins again.
func TestSessionJoinFailure(t *testing.T) {
	a := newAcks()
	buf := joinBuffer(t, joinQuery)
	write(t, buf, from("orders", `{"order_id": 1, "amount": 10}`), a.fn("o"))
	write(t, buf, from("shipments", `not json`), a.fn("s"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _, err := buf.Read(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), `session_window join: decoding the messages of input "shipments": `) {
		t.Fatalf("Read: %v, want the decoding error of shipments", err)
	}
	want := map[string][]string{"o": {err.Error()}, "s": {err.Error()}}
	if diff := cmp.Diff(want, a.snapshot()); diff != "" {
		t.Errorf("acks (-want +got):\n%s", diff)
	}
	rows, _, _ := session(t, buf, a, map[string]message.Batch{
		"o2": from("orders", `{"order_id": 1, "amount": 10}`), "s2": from("shipments", `{"order_id": 1, "carrier": "rail"}`)})
	if diff := cmp.Diff([]string{`{"order_id":1,"amount":10,"carrier":"rail"}`}, rows); diff != "" {
		t.Errorf("rows after the failure (-want +got):\n%s", diff)
	}
}

// TestSessionJoinConfig: every documented configuration error, named by
// its path, from --validate (schema and deep build).
func TestSessionJoinConfig(t *testing.T) {
	for _, tc := range []struct{ join, want string }{
		{`{query: "SELEC * FROM orders", codec: {type: json}}`, `streams[0].buffer: join.query: `},
		{`{query: "DELETE FROM orders", codec: {type: json}}`, `streams[0].buffer: join.query: `},
		{`{query: "SELECT 1"}`, `streams[0].buffer.join.codec: required field is missing`},
		{`{codec: {type: json}}`, `streams[0].buffer.join.query: required field is missing`},
		{`{query: "SELECT 1", codec: {type: json}, thread_num: 0}`, `streams[0].buffer.join.thread_num: minimum`},
		{`{query: "SELECT 1", codec: {type: jsno}}`, `streams[0].buffer: join.codec.type: unknown codec "jsno"`},
		{`{query: "SELECT 1", codec: {type: json, fields: [a]}}`, `streams[0].buffer: join.codec: the json codec takes no fields besides type`},
		{`{query: "SELECT 1", codec: {type: json}, bogus: 1}`, `streams[0].buffer.join.bogus: unknown field`},
	} {
		t.Run(tc.join, func(t *testing.T) {
			cfg, err := componenttest.Materialize(`streams:
  - input: {type: memory, messages: []}
    buffer: {type: session_window, gap: 1s, join: ` + tc.join + `}
    pipeline: {processors: []}
    output: {type: drop}
`)
			var ps []string
			if err != nil {
				ps = strings.Split(err.Error(), "\n")
			} else {
				for _, p := range engine.Check(cfg, component.Default) {
					ps = append(ps, p.Error())
				}
			}
			if len(ps) != 1 || !strings.HasPrefix(ps[0], tc.want) {
				t.Errorf("problems %q, want one starting %q", ps, tc.want)
			}
		})
	}
}

// TestJoinStream: ArkFlow's join shape end to end: two named inputs of
// multiple_inputs, a session_window with join, the joined rows written
// to a file.
func TestJoinStream(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.jsonl")
	e := componenttest.Engine(t, `streams:
  - id: join
    input:
      type: multiple_inputs
      inputs:
        - {type: memory, name: orders, messages: ['{"order_id": 1, "amount": 10}', '{"order_id": 2, "amount": 20}']}
        - {type: memory, name: shipments, messages: ['{"order_id": 2, "carrier": "rail"}']}
    buffer:
      type: session_window
      gap: 50ms
      join:
        query: "SELECT o.order_id, o.amount, s.carrier FROM orders o JOIN shipments s ON o.order_id = s.order_id"
        codec: {type: json}
    pipeline:
      processors:
    output: {type: file, path: `+out+`}
`)
	componenttest.WaitFor(t, "the stream to complete", 20*time.Second, func() bool {
		return componenttest.Stream(t, e, "join").State == stream.StateCompleted
	})
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"order_id":2,"amount":20,"carrier":"rail"}`+"\n", string(data)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// BenchmarkSessionJoin: one session of 1000 orders and 1000 shipments
// joined (decode both, run the query) per iteration.
func BenchmarkSessionJoin(b *testing.B) {
	var orders, shipments []string
	for i := range 1000 {
		orders = append(orders, fmt.Sprintf(`{"order_id": %d, "amount": %d}`, i, i*10))
		shipments = append(shipments, fmt.Sprintf(`{"order_id": %d, "carrier": "rail"}`, i))
	}
	ob, sb := from("orders", orders...), from("shipments", shipments...)
	ctx := context.Background()
	noop := func(context.Context, error) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		// Close flushes the session at once: a fresh buffer per round.
		b.StopTimer()
		buf := joinBuffer(b, joinQuery)
		_ = buf.Write(ctx, ob, noop)
		_ = buf.Write(ctx, sb, noop)
		_ = buf.Close(ctx)
		b.StartTimer()
		out, _, err := buf.Read(ctx)
		if err != nil || out.Len() != 1000 {
			b.Fatalf("%d rows, %v", out.Len(), err)
		}
	}
}
