package processor

import (
	stdjson "encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecodeMatchesEncodingJSON keeps decodeJSON interchangeable with the
// encoding/json parse message.Message does, so a value does not depend on
// which of the two parsed it.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	inputs := []string{
		`{"id": 1, "v": 0.5}`,
		`{"a": {"b": [1, 2.5e3, -0.0, "x", true, false, null]}, "c": {}}`,
		`[1, "two", {"three": 3}]`,
		`"caf\u00e9 \ud83d\ude00 \n\t\"\\"`,
		`12345678901234567890`,
		`1e400`,
		`{"dup": 1, "dup": 2}`,
		"\"bad utf8 \xff\"",
		`  {"spaces" :  1 }  `,
		`null`,
		`{"id": 1`,
		`{"id": 1}}`,
		`not json`,
		``,
		`{'single': 1}`,
	}
	for _, in := range inputs {
		t.Run(in, func(t *testing.T) {
			var want any
			wantErr := stdjson.Unmarshal([]byte(in), &want)
			got, err := decodeJSON([]byte(in))
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("decodeJSON error = %v, encoding/json error = %v", err, wantErr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("decodeJSON differs from encoding/json (-std +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkDecoders compares encoding/json with the decoder decodeJSON
// uses, on the payload of the throughput benchmark.
func BenchmarkDecoders(b *testing.B) {
	in := []byte(`{"id": 123456, "v": 654321}`)
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v any
			if err := stdjson.Unmarshal(in, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("goccy/go-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeJSON(in); err != nil {
				b.Fatal(err)
			}
		}
	})
}
