package wal

import (
	"errors"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/message"
	"github.com/google/go-cmp/cmp"
)

// view is what a decoded message must preserve, comparable with go-cmp.
type view struct {
	Payload string
	Meta    message.Metadata
}

func views(t testing.TB, b message.Batch) []view {
	t.Helper()
	var out []view
	for i := range b.Messages {
		p, err := b.Messages[i].Payload()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, view{string(p), b.Messages[i].Meta})
	}
	return out
}

func sampleBatch() message.Batch {
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	full := message.New([]byte(`{"a":1}`))
	full.Meta = message.Metadata{
		Key:        []byte("k1"),
		Source:     "kafka:topic",
		Partition:  -3,
		Offset:     1 << 40,
		Timestamp:  ts,
		IngestTime: ts.Add(time.Second),
		Fields:     map[string]string{"x": "1", "empty": ""},
	}
	emptyKey := message.New(nil)
	emptyKey.Meta.Key = []byte{}
	old := message.New([]byte("before 1970"))
	old.Meta.Timestamp = time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC)
	return message.Batch{Messages: []message.Message{full, message.New([]byte("plain")), emptyKey, old}}
}

func TestBatchRoundTrip(t *testing.T) {
	structured := message.NewStructured(map[string]any{"b": 2.0})
	tests := []struct {
		name string
		in   message.Batch
	}{
		{"empty", message.Batch{}},
		{"metadata", sampleBatch()},
		{"structured", message.Batch{Messages: []message.Message{structured}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := views(t, tt.in)
			enc, err := EncodeBatch([]byte("prefix"), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeBatch(enc[len("prefix"):])
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, views(t, got)); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
			for i := range got.Messages {
				if k := got.Messages[i].Meta.Key; (k == nil) != (tt.in.Messages[i].Meta.Key == nil) {
					t.Errorf("message %d: key nil-ness changed", i)
				}
				if f := got.Messages[i].Meta.Fields; f != nil && len(f) == 0 {
					t.Errorf("message %d: empty Fields map allocated", i)
				}
			}
		})
	}
}

func TestEncodeBatchStructuredError(t *testing.T) {
	bad := message.Batch{Messages: []message.Message{message.NewStructured(func() {})}}
	if _, err := EncodeBatch(nil, bad); err == nil {
		t.Error("EncodeBatch of an unencodable structured value succeeded")
	}
}

func TestDecodeBatchRejectsDamage(t *testing.T) {
	good, err := EncodeBatch(nil, sampleBatch())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"bad version", append([]byte{9}, good[1:]...)},
		{"huge count", []byte{batchVersion, 0xff, 0xff, 0xff, 0x0f}},
		{"trailing bytes", append(append([]byte{}, good...), 0)},
		{"unknown flag", []byte{batchVersion, 1, 0x40, 0, 0, 0, 0, 0}},
		{"bad nanoseconds", []byte{batchVersion, 1, hasTimestamp, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0}},
		{"partition overflow", []byte{batchVersion, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0}},
	}
	for n := range good {
		tests = append(tests, struct {
			name string
			data []byte
		}{"cut", good[:n]})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeBatch(tt.data); !errors.Is(err, ErrBadBatch) {
				t.Errorf("DecodeBatch(%x) = %v, want ErrBadBatch", tt.data, err)
			}
		})
	}
}
