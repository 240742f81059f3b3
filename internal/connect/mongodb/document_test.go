package mongodb

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/flowplane/flowplane/internal/message"
)

// TestToDocument: a JSON object becomes the BSON document with the same
// fields in the same order and exactly these types.
func TestToDocument(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     bson.D
	}{
		{"empty", `{}`, bson.D{}},
		{"scalars in order", `{"s":"x","t":true,"f":false,"n":null}`,
			bson.D{{Key: "s", Value: "x"}, {Key: "t", Value: true}, {Key: "f", Value: false}, {Key: "n", Value: nil}}},
		{"integers are int64", `{"a":1,"b":-7,"c":0,"d":9223372036854775807,"e":-9223372036854775808,"z":-0}`,
			bson.D{{Key: "a", Value: int64(1)}, {Key: "b", Value: int64(-7)}, {Key: "c", Value: int64(0)},
				{Key: "d", Value: int64(math.MaxInt64)}, {Key: "e", Value: int64(math.MinInt64)}, {Key: "z", Value: int64(0)}}},
		{"other numbers are doubles", `{"a":1.5,"b":1.0,"c":1e3,"d":2E-2,"e":9223372036854775808,"f":-0.0}`,
			bson.D{{Key: "a", Value: 1.5}, {Key: "b", Value: 1.0}, {Key: "c", Value: 1000.0}, {Key: "d", Value: 0.02},
				{Key: "e", Value: 9223372036854775808.0}, {Key: "f", Value: math.Copysign(0, -1)}}},
		{"nested", `{"user":{"id":7,"tags":["a",1,2.5,null,{"k":[]}]},"v":[]}`,
			bson.D{
				{Key: "user", Value: bson.D{{Key: "id", Value: int64(7)},
					{Key: "tags", Value: bson.A{"a", int64(1), 2.5, nil, bson.D{{Key: "k", Value: bson.A{}}}}}}},
				{Key: "v", Value: bson.A{}},
			}},
		{"duplicate key keeps first place, last value", `{"a":1,"b":2,"a":3}`,
			bson.D{{Key: "a", Value: int64(3)}, {Key: "b", Value: int64(2)}}},
		{"unicode and escapes", `{"ключ":"\u00e9\n\"","_id":"x"}`,
			bson.D{{Key: "ключ", Value: "é\n\""}, {Key: "_id", Value: "x"}}},
		{"surrounding space", " \n{\"a\":1}\n ", bson.D{{Key: "a", Value: int64(1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := toDocument([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// cmp compares floats with ==, blind to the sign of zero.
			if f, ok := lookupFloat(got, "f"); ok && f == 0 && math.Signbit(f) != strings.Contains(tc.in, "-0.0") {
				t.Errorf("the sign of zero changed")
			}
			// The driver encodes it and decodes the same values back.
			raw, err := bson.Marshal(got)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			var back bson.D
			if err := bson.Unmarshal(raw, &back); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if diff := cmp.Diff(tc.want, back); diff != "" {
				t.Errorf("round trip through BSON (-want +got):\n%s", diff)
			}
		})
	}
}

func lookupFloat(d bson.D, k string) (float64, bool) {
	v, ok := lookup(d, k)
	if !ok {
		return 0, false
	}
	f, ok := v.(float64)
	return f, ok
}

// TestBSONTypes: the encoded document holds int64 (0x12), double (0x01),
// null (0x0A), document (0x03) and array (0x04) elements.
func TestBSONTypes(t *testing.T) {
	d, err := toDocument([]byte(`{"i":1,"d":1.5,"n":null,"o":{},"a":[],"s":"x","b":true}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bson.Type{"i": bson.TypeInt64, "d": bson.TypeDouble, "n": bson.TypeNull,
		"o": bson.TypeEmbeddedDocument, "a": bson.TypeArray, "s": bson.TypeString, "b": bson.TypeBoolean}
	elems, err := bson.Raw(raw).Elements()
	if err != nil {
		t.Fatal(err)
	}
	if len(elems) != len(want) {
		t.Fatalf("%d elements, want %d", len(elems), len(want))
	}
	for _, e := range elems {
		if got := e.Value().Type; got != want[e.Key()] {
			t.Errorf("%s: BSON type %v, want %v", e.Key(), got, want[e.Key()])
		}
	}
}

func TestToDocumentRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, err string }{
		{"empty payload", ``, "the payload is empty"},
		{"array", `[{"a":1}]`, "the payload is a JSON array, not an object"},
		{"string", `"x"`, "the payload is a JSON string, not an object"},
		{"number", `12`, "the payload is a JSON number, not an object"},
		{"null", `null`, "the payload is a JSON null, not an object"},
		{"bool", `true`, "the payload is a JSON boolean, not an object"},
		{"not json", `{"a":}`, "the payload is not valid JSON"},
		{"truncated", `{"a":[1,2`, "the payload is not valid JSON"},
		{"two objects", `{"a":1}{"b":2}`, "the payload is not valid JSON: data after the object"},
		{"garbage after", `{"a":1} x`, "the payload is not valid JSON"},
		{"nul in key", `{"a\u0000b":1}`, "holds a NUL byte"},
		{"huge number", `{"a":1e400}`, "number 1e400 is out of the range of a double"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := toDocument([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// TestDocumentsNameTheMessage: one bad message fails the batch with an
// error naming its index; structured messages are written as their JSON.
func TestDocumentsNameTheMessage(t *testing.T) {
	b := message.Batch{Messages: []message.Message{
		message.New([]byte(`{"id":1}`)),
		message.NewStructured(map[string]any{"id": 2.0, "name": "b"}),
		message.New([]byte(`[1,2]`)),
	}}
	_, err := documents(b)
	if err == nil || !strings.Contains(err.Error(), "mongodb: message 2: the payload is a JSON array, not an object") {
		t.Errorf("error %v, want one naming message 2", err)
	}
	b.Messages = b.Messages[:2]
	docs, err := documents(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		bson.D{{Key: "id", Value: int64(1)}},
		// A structured value is serialized (keys sorted) and read back:
		// a float64 holding a whole number is written as 2, an int64.
		bson.D{{Key: "id", Value: int64(2)}, {Key: "name", Value: "b"}},
	}
	if diff := cmp.Diff(want, docs); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestUpsertModels: each document becomes a ReplaceOne upsert whose filter
// holds the key fields, dotted paths included, in key_fields order.
func TestUpsertModels(t *testing.T) {
	doc := func(s string) bson.D {
		d, err := toDocument([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := doc(`{"id":1,"user":{"id":"u1","org":{"x":true}},"v":"a"}`)
	b := doc(`{"v":"b","user":{"id":"u2","org":{"x":false}},"id":2}`)
	models, err := upsertModels([]any{a, b}, []string{"id", "user.id", "user.org"})
	if err != nil {
		t.Fatal(err)
	}
	upsert := true
	want := []mongo.WriteModel{
		&mongo.ReplaceOneModel{Upsert: &upsert, Replacement: a, Filter: bson.D{{Key: "id", Value: int64(1)},
			{Key: "user.id", Value: "u1"}, {Key: "user.org", Value: bson.D{{Key: "x", Value: true}}}}},
		&mongo.ReplaceOneModel{Upsert: &upsert, Replacement: b, Filter: bson.D{{Key: "id", Value: int64(2)},
			{Key: "user.id", Value: "u2"}, {Key: "user.org", Value: bson.D{{Key: "x", Value: false}}}}},
	}
	if diff := cmp.Diff(want, models); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	for _, tc := range []struct{ name, in, key, err string }{
		{"missing", `{"a":1}`, "id", `mongodb: message 1: key field "id" is missing`},
		{"missing nested", `{"user":{"name":"x"}}`, "user.id", `key field "user.id" is missing`},
		{"path through scalar", `{"user":5}`, "user.id", `key field "user.id" is missing`},
		{"null", `{"id":null}`, "id", `key field "id" is null`},
		{"array", `{"id":[1,2]}`, "id", `key field "id" is an array`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := upsertModels([]any{a, doc(tc.in)}, []string{tc.key})
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "message 1") {
				t.Errorf("error %v, want one containing %q and naming message 1", err, tc.err)
			}
		})
	}
}

// FuzzToDocument: any payload either fails with an error or becomes a
// document the driver can encode, with the fields encoding/json sees.
func FuzzToDocument(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[1.5,null,{"c":"d"}],"a":2}`, `[1]`, `{"a":1e400}`, `{"a":`, `{"\u0000":1}`, `{"a":-0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		d, err := toDocument(p)
		if err != nil {
			return
		}
		if _, err := bson.Marshal(d); err != nil {
			t.Fatalf("%q: the driver cannot encode %v: %v", p, d, err)
		}
		var m map[string]any
		if err := json.Unmarshal(p, &m); err != nil {
			t.Fatalf("%q: accepted, but encoding/json says %v", p, err)
		}
		if len(m) != len(d) {
			t.Errorf("%q: %d fields, encoding/json sees %d", p, len(d), len(m))
		}
	})
}
