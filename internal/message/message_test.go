package message_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/message"
)

func TestLazyParseKeepsPayload(t *testing.T) {
	raw := []byte(`{"b": 1, "a": [true, null]}`)
	m := message.New(raw)
	if m.HasStructured() {
		t.Fatal("structured before asked")
	}
	v, err := m.Structured()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"b": 1.0, "a": []any{true, nil}}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("structured (-want +got):\n%s", diff)
	}
	p, err := m.Payload()
	if err != nil || string(p) != string(raw) {
		t.Errorf("payload after parse = %q, %v; want the original bytes", p, err)
	}
}

func TestSetStructuredSerializesOnDemand(t *testing.T) {
	m := message.New([]byte(`{"x": 1}`))
	m.SetStructured(map[string]any{"y": 2})
	p, err := m.Payload()
	if err != nil || string(p) != `{"y":2}` {
		t.Fatalf("payload = %q, %v", p, err)
	}
	m.SetPayload([]byte(`[1]`))
	v, err := m.Structured()
	if err != nil || !cmp.Equal(v, []any{1.0}) {
		t.Fatalf("structured after SetPayload = %v, %v", v, err)
	}
	s := message.NewStructured("hi")
	if p, _ := s.Payload(); string(p) != `"hi"` {
		t.Errorf("NewStructured payload = %q", p)
	}
}

func TestParseError(t *testing.T) {
	m := message.New([]byte(`{nope`))
	_, err := m.Structured()
	var pe *message.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *ParseError", err)
	}
	if m.HasStructured() {
		t.Error("a failed parse must not leave a structured value")
	}
	if _, err := (&message.Message{}).Payload(); err != nil {
		t.Errorf("zero message payload: %v", err)
	}
	bad := message.NewStructured(func() {})
	if _, err := bad.Payload(); err == nil {
		t.Error("serializing a func must fail")
	}
}

func TestBatchAndMeta(t *testing.T) {
	b := message.Batch{Messages: []message.Message{message.New([]byte("abc")), message.New([]byte("de"))}}
	if b.Len() != 2 || b.Bytes() != 5 {
		t.Errorf("Len %d Bytes %d", b.Len(), b.Bytes())
	}
	b.Messages[0].SetMeta("k", "v")
	if b.Messages[0].Meta.Fields["k"] != "v" || b.Messages[1].Meta.Fields != nil {
		t.Error("SetMeta")
	}
}

func BenchmarkStructured(b *testing.B) {
	raw := []byte(`{"id": 12345, "v": 678901}`)
	b.ReportAllocs()
	for b.Loop() {
		m := message.New(raw)
		if _, err := m.Structured(); err != nil {
			b.Fatal(err)
		}
	}
}
