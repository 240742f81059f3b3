package tap_test

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/tap"
)

func TestParseParams(t *testing.T) {
	def := tap.Params{Rate: tap.DefaultRate, Duration: tap.DefaultDuration}
	tests := []struct {
		query string
		job   bool
		want  tap.Params
		bad   string // the parameter named by the error
	}{
		{query: "", want: def},
		{query: "stage=input&rate=1000&duration=1h", want: tap.Params{Stage: "input", Rate: 1000, Duration: time.Hour}},
		{query: "stage=processor:2&duration=90", want: tap.Params{Stage: "processor:2", Rate: 10, Duration: 90 * time.Second}},
		{query: "stage=output&duration=2m30s", want: tap.Params{Stage: "output", Rate: 10, Duration: 150 * time.Second}},
		{query: "operator=window", job: true, want: tap.Params{Operator: "window", Rate: 10, Duration: time.Minute}},
		{query: "rate=1001", bad: "rate"},
		{query: "rate=0", bad: "rate"},
		{query: "rate=ten", bad: "rate"},
		{query: "rate=1&rate=2", bad: "rate"},
		{query: "duration=1h1s", bad: "duration"},
		{query: "duration=3601", bad: "duration"},
		{query: "duration=0", bad: "duration"},
		{query: "duration=-5s", bad: "duration"},
		{query: "stage=processor:01", bad: "stage"},
		{query: "stage=processor:-1", bad: "stage"},
		{query: "stage=middle", bad: "stage"},
		{query: "stage=", bad: "stage"},
		{query: "operator=x", bad: "operator"},
		{query: "stage=input", job: true, bad: "stage"},
		{query: "operator=", job: true, bad: "operator"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tap.ParseParams(q, tt.job)
			var pe *tap.ParamError
			switch {
			case tt.bad != "" && (!errors.As(err, &pe) || pe.Param != tt.bad):
				t.Fatalf("ParseParams(%q) = %v, want an error naming %s", tt.query, err, tt.bad)
			case tt.bad == "" && err != nil:
				t.Fatalf("ParseParams(%q): %v", tt.query, err)
			case tt.bad == "":
				if d := cmp.Diff(tt.want, got); d != "" {
					t.Errorf("ParseParams(%q) (-want +got):\n%s", tt.query, d)
				}
			}
		})
	}
}

func TestStreamPoint(t *testing.T) {
	tests := []struct {
		stage      string
		processors int
		want       string
		err        bool
	}{
		{"", 0, "input", false},
		{"", 3, "processor:2", false},
		{"processor:2", 3, "processor:2", false},
		{"processor:3", 3, "", true},
		{"processor:0", 0, "", true},
		{"output", 0, "output", false},
		{"bogus", 1, "", true},
	}
	for _, tt := range tests {
		got, err := tap.StreamPoint(tt.stage, tt.processors)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("StreamPoint(%q, %d) = %q, %v; want %q, error %v", tt.stage, tt.processors, got, err, tt.want, tt.err)
		}
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func batch(n int) message.Batch {
	b := message.Batch{Messages: make([]message.Message, n)}
	for i := range b.Messages {
		b.Messages[i] = message.New([]byte{'a' + byte(i%26)})
		b.Messages[i].Meta.Fields = map[string]string{"i": string(rune('a' + i%26))}
	}
	return b
}

func TestSetRateAndDrops(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	var s tap.Set
	s.Offer("input", batch(5)) // nothing attached: nothing happens
	tp := tap.New("processor:0", 3, 4, clk.now)
	detach := s.Attach(tp)
	if s.Attached() != 1 {
		t.Fatalf("Attached = %d", s.Attached())
	}
	s.Offer("input", batch(5)) // another point
	if tp.Sampled() != 0 {
		t.Fatalf("sampled %d at another point", tp.Sampled())
	}
	s.Offer("processor:0", batch(10)) // a burst of one second's worth: 3
	if tp.Sampled() != 3 || tp.Dropped() != 0 {
		t.Fatalf("sampled %d, dropped %d; want 3, 0", tp.Sampled(), tp.Dropped())
	}
	s.Offer("processor:0", batch(10)) // no token left at the same instant
	if tp.Sampled() != 3 {
		t.Fatalf("sampled %d beyond the rate", tp.Sampled())
	}
	clk.t = clk.t.Add(time.Second) // 3 more tokens, room for 1 sample
	s.Offer("processor:0", batch(10))
	if tp.Sampled() != 4 || tp.Dropped() != 2 {
		t.Fatalf("sampled %d, dropped %d; want 4, 2", tp.Sampled(), tp.Dropped())
	}
	got := <-tp.C()
	want := tap.Sample{Point: "processor:0", At: time.Unix(1000, 0), Payload: []byte("a"), Meta: map[string]string{"i": "a"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sample (-want +got):\n%s", d)
	}
	detach()
	detach()
	if s.Attached() != 0 {
		t.Fatalf("Attached = %d after detach", s.Attached())
	}
	clk.t = clk.t.Add(time.Hour)
	s.Offer("processor:0", batch(10))
	if tp.Sampled() != 4 {
		t.Fatalf("a detached tap sampled")
	}
}

func TestSampleIsACopy(t *testing.T) {
	var s tap.Set
	tp := tap.New("output", 10, 1, nil)
	defer s.Attach(tp)()
	b := batch(1)
	b.Messages[0].Meta.Source = "kafka"
	b.Messages[0].Meta.Key = []byte("k1")
	s.Offer("output", b)
	b.Messages[0].SetPayload([]byte("changed"))
	b.Messages[0].Meta.Fields["i"] = "changed"
	got := <-tp.C()
	if string(got.Payload) != "a" || got.Meta["i"] != "a" || got.Meta["source"] != "kafka" || got.Meta["key"] != "k1" {
		t.Fatalf("sample %+v is not a copy of the message as offered", got)
	}
}

func TestOfferValues(t *testing.T) {
	var s tap.Set
	tp := tap.New("window", 10, 8, nil)
	defer s.Attach(tp)()
	vals := []any{[]byte(`{"a":1}`), map[string]any{"b": 2}}
	s.OfferValues("window", len(vals), func(i int) any { return vals[i] })
	s.OfferValues("other", len(vals), func(i int) any { t.Fatal("read at another point"); return nil })
	if a, b := <-tp.C(), <-tp.C(); string(a.Payload) != `{"a":1}` || string(b.Payload) != `{"b":2}` {
		t.Fatalf("payloads %q %q", a.Payload, b.Payload)
	}
}

func TestNilSet(t *testing.T) {
	var s *tap.Set
	s.Offer("input", batch(1))
	s.OfferValues("x", 1, func(int) any { t.Fatal("nil set read a value"); return nil })
	if s.Attached() != 0 {
		t.Fatal("nil set has taps")
	}
}

func FuzzParseParams(f *testing.F) {
	for _, s := range []string{"", "stage=input&rate=5&duration=30s", "operator=w", "duration=3600", "rate=1000&stage=processor:12", "duration=1h0m0.000000001s"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, raw string, job bool) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		p, err := tap.ParseParams(q, job)
		if err != nil {
			var pe *tap.ParamError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParamError", err)
			}
			return
		}
		if p.Rate < 1 || p.Rate > tap.MaxRate || p.Duration <= 0 || p.Duration > tap.MaxDuration {
			t.Fatalf("ParseParams(%q) = %+v, out of bounds", raw, p)
		}
		if job && p.Stage != "" || !job && p.Operator != "" {
			t.Fatalf("ParseParams(%q, %v) = %+v, the other kind's parameter", raw, job, p)
		}
	})
}
