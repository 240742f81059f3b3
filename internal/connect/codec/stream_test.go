package codec

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	_ "github.com/flowplane/flowplane/internal/connect/kafka"
	_ "github.com/flowplane/flowplane/internal/connect/processor"
	_ "github.com/flowplane/flowplane/internal/connect/sqlproc"
)

// kafkaCluster starts a one-broker kfake cluster on 127.0.0.1 with topics
// in and out.
func kafkaCluster(t *testing.T) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

func produceValues(t *testing.T, addr string, values ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: "in", Value: []byte(v)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeJSON reads n records from topic out, each a JSON object.
func consumeJSON(t *testing.T, addr string, n int) []map[string]any {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("read %d records of %d from out", len(out), n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			var m map[string]any
			if err := json.Unmarshal(r.Value, &m); err != nil {
				t.Errorf("record %q: %v", r.Value, err)
			}
			out = append(out, m)
		})
	}
	return out
}

func kafkaStream(addr, codec string) string { return kafkaStreamSQL(addr, codec, "") }

// kafkaStreamSQL is kafkaStream with an sql processor running query.
func kafkaStreamSQL(addr, codec, query string) string {
	procs := "[]"
	if query != "" {
		procs = fmt.Sprintf("[{type: sql, query: %q}]", query)
	}
	return fmt.Sprintf(`
streams:
  - id: k
    input:
      type: kafka
      brokers: [%[1]q]
      topics: [in]
      consumer_group: g
      codec: %[2]s
    pipeline:
      processors: %[3]s
    output:
      type: kafka
      brokers: [%[1]q]
      topic: {type: value, value: out}
`, addr, codec, procs)
}

// TestKafkaDebezium reads a Debezium change feed from Kafka through the
// debezium_json codec: each change arrives as a flat row.
func TestKafkaDebezium(t *testing.T) {
	addr := kafkaCluster(t)
	produceValues(t, addr, dbzCreate, `{"schema": {"type": "struct"}, "payload": `+dbzDelete+`}`)
	componenttest.Engine(t, kafkaStream(addr, "{type: debezium_json}"))
	got := consumeJSON(t, addr, 2)
	want := []map[string]any{
		{"id": 1.0, "title": "pen", "price": 2.5, "op": "c", "ts_ms": 1.7e12, "source_db": "inventory", "source_table": "products",
			"before": nil, "source": map[string]any{"db": "inventory", "table": "products", "lsn": 5.0}},
		{"id": 1.0, "title": "pen", "price": 3.0, "op": "d", "ts_ms": 1700000000002.0, "source_db": "inventory", "source_table": "products",
			"before": map[string]any{"id": 1.0, "title": "pen", "price": 3.0}, "source": map[string]any{"db": "inventory", "table": "products"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// TestKafkaSchemaRegistry reads Confluent wire-format Avro records from
// Kafka through the schema_registry codec, the registry asking for basic
// auth.
func TestKafkaSchemaRegistry(t *testing.T) {
	reg := newRegistry(t, "Basic dXNlcjpwdw==") // user:pw
	addr := kafkaCluster(t)
	var values []string
	for i, name := range []string{"ann", "bob"} {
		b, err := avro.Marshal(avro.MustParse(registryAvro), map[string]any{"id": int64(i), "name": name})
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, wire(1, nil, b))
	}
	produceValues(t, addr, values...)
	componenttest.Engine(t, kafkaStream(addr, fmt.Sprintf(
		"{type: schema_registry, registry_url: %q, auth: {type: basic, username: user, password: pw}}", reg.URL)))
	got := consumeJSON(t, addr, 2)
	want := []map[string]any{{"id": 0.0, "name": "ann"}, {"id": 1.0, "name": "bob"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if n := reg.hitsOf("1"); n != 1 {
		t.Errorf("schema fetched %d times, want 1", n)
	}
}

// TestKafkaDebeziumSQL runs testdata/arkflow/cdc_debezium.yaml's pipeline:
// change events decoded by debezium_json, routed by op in SQL.
func TestKafkaDebeziumSQL(t *testing.T) {
	addr := kafkaCluster(t)
	produceValues(t, addr, dbzCreate, dbzUpdate, dbzDelete)
	componenttest.Engine(t, kafkaStreamSQL(addr, "{type: debezium_json}",
		"SELECT op, id, title, price, source_table, ts_ms FROM flow WHERE op IN ('c', 'u', 'r')"))
	got := consumeJSON(t, addr, 2)
	want := []map[string]any{
		{"op": "c", "id": 1.0, "title": "pen", "price": 2.5, "source_table": "products", "ts_ms": 1.7e12},
		{"op": "u", "id": 1.0, "title": "pen", "price": 3.0, "source_table": "products", "ts_ms": 1700000000001.0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// TestProtobufExamplePipeline runs the processors of
// testdata/arkflow/protobuf_example.yaml on a batch: JSON to a table, an
// SQL summary, encoded to Protobuf with the repository's
// testdata/protos/readings.proto and decoded again.
func TestProtobufExamplePipeline(t *testing.T) {
	protos := []any{"../../../testdata/protos/"}
	steps := []struct {
		typ  string
		conf map[string]any
	}{
		{"json_to_arrow", map[string]any{}},
		{"sql", map[string]any{"query": "SELECT count(ts) AS ts, sum(reading) AS reading, cast(count(device) AS string) AS device FROM flow"}},
		{"arrow_to_protobuf", map[string]any{"proto_inputs": protos, "message_type": "readings.Reading"}},
		{"protobuf_to_arrow", map[string]any{"proto_inputs": protos, "message_type": "readings.Reading"}},
	}
	b := msgs(`{"ts": 1, "reading": 2.5, "device": "a"}`, `{"ts": 2, "reading": 1.5, "device": "b"}`)
	for _, s := range steps {
		p, err := component.Default.NewProcessor(s.typ, s.conf, component.Resources{})
		if err != nil {
			t.Fatalf("%s: %v", s.typ, err)
		}
		if b.Table != nil && !component.IsColumnar(p) {
			t.Fatalf("%s is not columnar", s.typ)
		}
		out, err := p.Process(ctx, b)
		if err != nil {
			t.Fatalf("%s: %v", s.typ, err)
		}
		b = out[0]
	}
	want := tbl{Cols: []string{"ts int64", "reading float64", "device utf8"}, Rows: [][]any{{int64(2), 4.0, "2"}}}
	if diff := cmp.Diff(want, dump(t, b.Table)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}
