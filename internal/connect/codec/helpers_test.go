package codec

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

// tbl is a table in a comparable form: columns as "name type" ("name
// json" for a JSON column) and rows of Go values (nil for null). dump
// leaves the __meta_* columns out (TestDecodeMetadata checks them).
type tbl struct {
	Cols []string
	Rows [][]any
}

func dump(t *testing.T, rec arrow.RecordBatch) tbl {
	t.Helper()
	if rec == nil {
		t.Fatal("no table")
	}
	var out tbl
	var keep []int
	for c, f := range rec.Schema().Fields() {
		if strings.HasPrefix(f.Name, columnar.MetaPrefix) {
			continue
		}
		keep = append(keep, c)
		typ := f.Type.String()
		if isJSONField(f) {
			typ = "json"
		}
		out.Cols = append(out.Cols, f.Name+" "+typ)
	}
	for r := range int(rec.NumRows()) {
		row := make([]any, len(keep))
		for k, c := range keep {
			col := rec.Column(c)
			if col.IsNull(r) {
				continue
			}
			row[k] = col.GetOneForMarshal(r)
			if s, ok := col.(*array.String); ok {
				row[k] = s.Value(r)
			}
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}

// build makes a table from column definitions and rows (see tableBuilder).
func build(t *testing.T, cols []colDef, rows ...[]any) arrow.RecordBatch {
	t.Helper()
	var tb tableBuilder
	for _, c := range cols {
		if _, err := tb.column(c); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rows {
		tb.add(r)
	}
	rec, err := tb.build()
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func msgs(payloads ...string) message.Batch {
	out := make([]message.Message, len(payloads))
	for i, p := range payloads {
		out[i] = message.New([]byte(p))
	}
	return message.Batch{Messages: out}
}

func payloadStrings(t *testing.T, b message.Batch) []string {
	t.Helper()
	if b.Table != nil {
		t.Fatal("want messages, got a table")
	}
	out := make([]string, len(b.Messages))
	for i := range b.Messages {
		p, err := b.Messages[i].Payload()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(p)
	}
	return out
}

func newCodec(t *testing.T, name string, conf map[string]any) component.Codec {
	t.Helper()
	if conf == nil {
		conf = map[string]any{}
	}
	c, err := component.Default.NewCodec(name, conf, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	ctx     = context.Background()
	i64     = arrow.PrimitiveTypes.Int64
	f64     = arrow.PrimitiveTypes.Float64
	str     = arrow.BinaryTypes.String
	boolean = arrow.FixedWidthTypes.Boolean
)

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func messageBatchOf(rec arrow.RecordBatch) message.Batch { return message.Batch{Table: rec} }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
func jsonMarshal(v any) ([]byte, error)   { return json.Marshal(v) }

var resNone = component.Resources{}

type protoMD = protoreflect.MessageDescriptor

func protoName(s string) protoreflect.FullName { return protoreflect.FullName(s) }
