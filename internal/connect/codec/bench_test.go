package codec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// benchBatch repeats payload n times.
func benchBatch(payload string, n int) message.Batch {
	p := make([]string, n)
	for i := range p {
		p[i] = payload
	}
	return msgs(p...)
}

func BenchmarkProtobufDecode(b *testing.B) {
	md, err := protoSource{MessageType: "example.v1.Reading", ProtoInputs: []string{"testdata/reading.proto"}}.load(ctx, sandbox.FS{})
	if err != nil {
		b.Fatal(err)
	}
	payload, err := newProtoTable(md).fromJSON([]byte(`{"ts": 1700000000000, "reading": 2.5, "device": "probe_3"}`))
	if err != nil {
		b.Fatal(err)
	}
	c := &Protobuf{t: newProtoTable(md)}
	batch := benchBatch(string(payload), 500)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Decode(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAvroDecode(b *testing.B) {
	r, err := newAvroRecord(registryAvro)
	if err != nil {
		b.Fatal(err)
	}
	payload, err := avro.Marshal(r.schema, map[string]any{"id": int64(7), "name": "ann"})
	if err != nil {
		b.Fatal(err)
	}
	c := &Avro{r: r}
	batch := benchBatch(string(payload), 500)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Decode(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCSVDecode(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("id,price,name,ok\n")
	for i := range 500 {
		fmt.Fprintf(&sb, "%d,%d.5,name %d,true\n", i, i, i)
	}
	c := &CSV{comma: ',', header: true}
	batch := msgs(sb.String())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Decode(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFlattenDebezium(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := flattenDebezium([]byte(dbzUpdate)); err != nil {
			b.Fatal(err)
		}
	}
}
