package columnar

import (
	"errors"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flowplane/flowplane/internal/message"
)

// ValueField is the binary column holding raw payloads (ArkFlow's
// DEFAULT_BINARY_VALUE_FIELD).
const ValueField = "__value__"

// Metadata columns of FromMessages, as ArkFlow names them.
const (
	MetaSource     = "__meta_source"      // utf8
	MetaPartition  = "__meta_partition"   // int32
	MetaOffset     = "__meta_offset"      // int64
	MetaKey        = "__meta_key"         // binary
	MetaTimestamp  = "__meta_timestamp"   // timestamp[ms, UTC], null when unknown
	MetaIngestTime = "__meta_ingest_time" // timestamp[ms, UTC], null when unknown
	MetaExt        = "__meta_ext"         // JSON column: the free-form fields as an object
	MetaPrefix     = "__meta_"
)

// JSONKey is the field metadata key marking a utf8 column whose values are
// JSON documents (nested objects, arrays, mixed types).
const JSONKey = "flowplane.json"

var errTODO = errors.New("columnar: not implemented yet")

// FromMessages returns the binary table of msgs: __value__ and the
// metadata columns.
func FromMessages(msgs []message.Message) (arrow.RecordBatch, error) { return nil, errTODO }

// FromJSON parses each payload as a JSON object and builds a table with a
// column per field (in order of first appearance), types inferred over all
// payloads: bool, int64, float64 (when any value has a fraction or is out
// of int64's range), utf8, or a JSON column. A payload that is not a JSON
// object is an error naming its index. include, when not empty, keeps only
// those fields (in the payloads' order).
func FromJSON(payloads [][]byte, include []string) (arrow.RecordBatch, error) {
	return nil, errTODO
}

// ToJSON returns each row of rec as a JSON object, columns in table order,
// nulls as null, JSON columns embedded as JSON. include, when not empty,
// keeps only those columns.
func ToJSON(rec arrow.RecordBatch, include []string) ([][]byte, error) { return nil, errTODO }

// Payloads returns the raw payloads of a batch: its messages' payloads, or
// the values of its table's column field (binary or utf8). A table
// without that column is an error naming it.
func Payloads(b message.Batch, field string) ([][]byte, error) { return nil, errTODO }

// Value returns row i of column c as a Go value: nil, bool, int64,
// uint64, float64, string, []byte, time.Time, or for a JSON column the
// decoded value (map[string]any, []any, ...).
func Value(c arrow.Array, i int) (any, error) { return nil, errTODO }

// Flatten replaces b.Table with Messages: the __value__ column's bytes as
// payloads when the table has one, else each row as a JSON object without
// the __meta_* columns; __meta_* columns set each message's metadata.
// A batch without a table is left as it is.
func Flatten(b *message.Batch) error {
	if b.Table == nil {
		return nil
	}
	return errTODO
}
