package kernel

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/operator"
)

// randValue builds a value as JSON decoding would, plus int64 and raw
// payloads.
func randValue(rnd *rand.Rand, depth int) any {
	n := 9
	if depth > 3 {
		n = 6
	}
	switch rnd.IntN(n) {
	case 0:
		return nil
	case 1:
		return rnd.IntN(2) == 0
	case 2:
		return rnd.NormFloat64() * 1e6
	case 3:
		return rnd.Int64() - math.MaxInt64/2
	case 4:
		return strconv.Itoa(rnd.Int()) + "é\x00"
	case 5:
		return []byte(`{"raw":` + strconv.Itoa(rnd.IntN(100)) + `}`)
	case 6:
		a := make([]any, rnd.IntN(4))
		for i := range a {
			a[i] = randValue(rnd, depth+1)
		}
		return a
	default:
		m := map[string]any{}
		for i := rnd.IntN(5); i > 0; i-- {
			m["k"+strconv.Itoa(rnd.IntN(10))] = randValue(rnd, depth+1)
		}
		return m
	}
}

func TestElementRoundTrip(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		recs := make([]operator.Record, rnd.IntN(20))
		for k := range recs {
			recs[k] = operator.Record{Time: rnd.Int64() - math.MaxInt64/2, Value: randValue(rnd, 0)}
		}
		for _, e := range []element{
			{kind: elemData, recs: recs},
			{kind: elemWatermark, wm: rnd.Int64() - math.MaxInt64/2},
			{kind: elemBarrier, b: barrier{id: rnd.Int64N(1 << 40), savepoint: i%2 == 0}},
			{kind: elemIdle},
			{kind: elemEnd},
		} {
			f, err := encodeElement(e, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeElement(f)
			if err != nil {
				t.Fatalf("case %d kind %d: %v", i, e.kind, err)
			}
			if e.kind == elemData && len(e.recs) == 0 {
				e.recs = []operator.Record{}
			}
			if !reflect.DeepEqual(got, e) {
				t.Fatalf("case %d: round trip\n got %#v\nwant %#v", i, got, e)
			}
		}
	}
}

func TestElementIntAndForeignValues(t *testing.T) {
	type point struct{ X int }
	f, err := encodeElement(element{kind: elemData, recs: []operator.Record{{Value: map[string]any{"n": 7, "p": point{3}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := decodeElement(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": int64(7), "p": map[string]any{"X": float64(3)}}
	if !reflect.DeepEqual(e.recs[0].Value, want) {
		t.Fatalf("got %#v, want %#v", e.recs[0].Value, want)
	}
	if _, err := encodeElement(element{kind: elemData, recs: []operator.Record{{Value: make(chan int)}}}, nil); err == nil {
		t.Fatal("a channel value was encoded")
	}
}

func TestDecodeElementRejectsCorruptFrames(t *testing.T) {
	for name, f := range map[string]dataplane.Frame{
		"huge count":      {Kind: dataplane.KindBatch, Payload: []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},
		"truncated":       {Kind: dataplane.KindBatch, Payload: []byte{1, 2}},
		"trailing":        {Kind: dataplane.KindBatch, Payload: []byte{0, 1}},
		"bad tag":         {Kind: dataplane.KindBatch, Payload: []byte{1, 0, 99}},
		"long string":     {Kind: dataplane.KindBatch, Payload: []byte{1, 0, tagString, 100, 'a'}},
		"watermark short": {Kind: dataplane.KindWatermark, Payload: []byte{1}},
		"barrier kind":    {Kind: dataplane.KindBarrier, Payload: []byte{2, 7}},
		"control":         {Kind: dataplane.KindControl},
	} {
		if _, err := decodeElement(f); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeElement: hostile frames never crash the decoder, and what it
// accepts encodes back to a frame it decodes to the same element.
func FuzzDecodeElement(f *testing.F) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		fr, _ := encodeElement(element{kind: elemData, recs: []operator.Record{{Time: 5, Value: randValue(rnd, 0)}}}, nil)
		f.Add(byte(fr.Kind), fr.Payload)
	}
	ts, _ := trace.ParseTraceState("v=1")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, TraceState: ts})
	fr, _ := encodeElement(element{kind: elemData, recs: []operator.Record{{Time: 5, Value: "x"}}, tc: &sc}, nil)
	f.Add(byte(fr.Kind), fr.Payload)
	f.Add(byte(dataplane.KindBarrier), []byte{4, 1})
	f.Add(byte(dataplane.KindBatch), []byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(byte(dataplane.KindBatch), append([]byte{1, 0}, make([]byte, 300)...))
	f.Fuzz(func(t *testing.T, kind byte, payload []byte) {
		e, err := decodeElement(dataplane.Frame{Kind: dataplane.Kind(kind), Payload: payload})
		if err != nil {
			return
		}
		fr, err := encodeElement(e, nil)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		e2, err := decodeElement(fr)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(e, e2) && !hasNaN(e) {
			t.Fatalf("not stable:\n%#v\n%#v", e, e2)
		}
	})
}

func hasNaN(e element) bool {
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case float64:
			return x != x
		case []any:
			for _, y := range x {
				if walk(y) {
					return true
				}
			}
		case map[string]any:
			for _, y := range x {
				if walk(y) {
					return true
				}
			}
		}
		return false
	}
	for _, r := range e.recs {
		if walk(r.Value) {
			return true
		}
	}
	return false
}
