package codec

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	dbzCreate = `{"before": null, "after": {"id": 1, "title": "pen", "price": 2.5}, "source": {"db": "inventory", "table": "products", "lsn": 5}, "op": "c", "ts_ms": 1700000000000}`
	dbzUpdate = `{"before": {"id": 1, "title": "pen", "price": 2.5}, "after": {"id": 1, "title": "pen", "price": 3}, "source": {"db": "inventory", "table": "products"}, "op": "u", "ts_ms": 1700000000001}`
	dbzDelete = `{"before": {"id": 1, "title": "pen", "price": 3}, "after": null, "source": {"db": "inventory", "table": "products"}, "op": "d", "ts_ms": 1700000000002}`
)

func TestFlattenDebezium(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" for a skipped tombstone
	}{
		{"create", dbzCreate, `{"id":1,"title":"pen","price":2.5,"op":"c","ts_ms":1700000000000,"source_db":"inventory","source_table":"products","before":null,"source":{"db":"inventory","table":"products","lsn":5}}`},
		{"update", dbzUpdate, `{"id":1,"title":"pen","price":3,"op":"u","ts_ms":1700000000001,"source_db":"inventory","source_table":"products","before":{"id":1,"title":"pen","price":2.5},"source":{"db":"inventory","table":"products"}}`},
		{"delete takes before", dbzDelete, `{"id":1,"title":"pen","price":3,"op":"d","ts_ms":1700000000002,"source_db":"inventory","source_table":"products","before":{"id":1,"title":"pen","price":3},"source":{"db":"inventory","table":"products"}}`},
		{"schema and payload wrapper", `{"schema": {"type": "struct"}, "payload": ` + dbzCreate + `}`, `{"id":1,"title":"pen","price":2.5,"op":"c","ts_ms":1700000000000,"source_db":"inventory","source_table":"products","before":null,"source":{"db":"inventory","table":"products","lsn":5}}`},
		{"row fields named like envelope columns give way", `{"after": {"op": "x", "source": 1, "k": 2}, "op": "r"}`, `{"k":2,"op":"r","ts_ms":null,"source_db":null,"source_table":null,"before":null,"source":null}`},
		{"no source, no rows", `{"op": "t"}`, `{"op":"t","ts_ms":null,"source_db":null,"source_table":null,"before":null,"source":null}`},
		{"tombstone", ``, ``},
		{"null tombstone", ` null `, ``},
		{"wrapped tombstone", `{"schema": null, "payload": null}`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := flattenDebezium([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestFlattenDebeziumErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"not json", `nope`, "not a Debezium change event: invalid character 'o' in literal null (expecting 'u')"},
		{"array", `[1]`, "not a Debezium change event: want a JSON object"},
		{"no op", `{"after": {}}`, "not a Debezium change event: no op"},
		{"trailing data", `{"op": "c"} {}`, "not a Debezium change event: data after the object"},
		{"truncated", `{"op": "c"`, "not a Debezium change event: EOF"},
		{"bad wrapped payload", `{"schema": {}, "payload": 3}`, "payload: not a Debezium change event: want a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := flattenDebezium([]byte(tt.in))
			if err == nil || err.Error() != tt.want || !errors.Is(err, ErrNotDebezium) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestDebeziumDecode(t *testing.T) {
	out, err := newCodec(t, "debezium_json", nil).Decode(ctx, msgs(dbzCreate, "", dbzDelete))
	if err != nil {
		t.Fatal(err)
	}
	want := tbl{
		Cols: []string{"id int64", "title utf8", "price float64", "op utf8", "ts_ms int64", "source_db utf8", "source_table utf8", "before json", "source json"},
		Rows: [][]any{
			{int64(1), "pen", 2.5, "c", int64(1700000000000), "inventory", "products", nil, `{"db":"inventory","table":"products","lsn":5}`},
			{int64(1), "pen", 3.0, "d", int64(1700000000002), "inventory", "products", `{"id":1,"title":"pen","price":3}`, `{"db":"inventory","table":"products"}`},
		},
	}
	if diff := cmp.Diff(want, dump(t, out.Table)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if _, err := newCodec(t, "debezium_json", nil).Decode(ctx, msgs(dbzCreate, "{}")); err == nil || err.Error() != "payload 1: not a Debezium change event: no op" {
		t.Errorf("error %v", err)
	}
}

func FuzzFlattenDebezium(f *testing.F) {
	for _, s := range []string{dbzCreate, dbzUpdate, dbzDelete, `{"schema":{},"payload":` + dbzCreate + `}`, `{"op":"c","after":[1]}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		row, err := flattenDebezium(p)
		if err != nil {
			if !errors.Is(err, ErrNotDebezium) {
				t.Fatalf("error %v is not ErrNotDebezium", err)
			}
			return
		}
		if row == nil {
			return
		}
		var m map[string]any
		if err := json.Unmarshal(row, &m); err != nil {
			t.Fatalf("flattened %q is not a JSON object: %v", row, err)
		}
		for _, k := range envelopeColumns {
			if _, ok := m[k]; !ok {
				t.Fatalf("flattened %q lacks %s", row, k)
			}
		}
	})
}

func FuzzCSVDecode(f *testing.F) {
	for _, s := range []string{"a,b\n1,2\n", "a\n\"x\n", "a,a\n", "x;y\r\n1;2", ""} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, p []byte, header bool) {
		c := &CSV{comma: ',', header: header}
		rec, src, err := c.decode([][]byte{p})
		if err != nil {
			return
		}
		if len(src) != int(rec.NumRows()) {
			t.Fatalf("%d rows, %d sources", rec.NumRows(), len(src))
		}
		if rec.NumRows() < 0 || int(rec.NumCols()) != len(rec.Schema().Fields()) {
			t.Fatalf("bad table %v", rec.Schema())
		}
	})
}
