package stream

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/tap"
)

// TestTapPoints taps every stage of a stream whose processor doubles each
// number and whose second processor keeps the even hundreds: each tap sees
// what passed its own stage, and a tap whose reader never reads drops
// without holding the stream back.
func TestTapPoints(t *testing.T) {
	double := &procFunc{fn: func(_ context.Context, b message.Batch) ([]message.Batch, error) {
		for i := range b.Messages {
			b.Messages[i].SetPayload([]byte(strconv.Itoa(2 * num(b.Messages[i]))))
		}
		return []message.Batch{b}, nil
	}}
	keep := &procFunc{fn: func(_ context.Context, b message.Batch) ([]message.Batch, error) {
		var out message.Batch
		for _, m := range b.Messages {
			if num(m)%200 == 0 {
				out.Messages = append(out.Messages, m)
			}
		}
		return []message.Batch{out}, nil
	}}
	var taps tap.Set
	points := []string{tap.PointInput, tap.ProcessorPoint(0), tap.ProcessorPoint(1), tap.PointOutput}
	var tapped []*tap.Tap
	for _, pt := range points {
		tp := tap.New(pt, tap.MaxRate, 2000, nil)
		tapped = append(tapped, tp)
		defer taps.Attach(tp)()
	}
	slow := tap.New(tap.PointInput, tap.MaxRate, 1, nil) // nobody reads it
	defer taps.Attach(slow)()

	in := newInput(10, 50)
	out := &testOutput{}
	s := mustNew(t, Config{Input: in, Processors: []component.Processor{double, keep}, Output: out, ThreadNum: 2, Taps: &taps})
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	in.checkAcks(t)
	if st := s.Status(); st.Received != 500 {
		t.Fatalf("received %d, want 500", st.Received)
	}
	first := func(tp *tap.Tap, n int) []int {
		var got []int
		for len(got) < n {
			select {
			case smp := <-tp.C():
				v, _ := strconv.Atoi(string(smp.Payload))
				got = append(got, v)
			default:
				t.Fatalf("tap %s holds %d samples, want at least %d", tp.Point(), len(got), n)
			}
		}
		slices.Sort(got)
		return got
	}
	// The rate allows a second's worth at once: 1000 of each point's first messages.
	if got := first(tapped[0], 500); got[0] != 0 || got[499] != 499 {
		t.Errorf("input tap saw %d..%d, want 0..499", got[0], got[499])
	}
	if got := first(tapped[1], 500); got[0] != 0 || got[499] != 998 {
		t.Errorf("processor:0 tap saw %d..%d, want 0..998", got[0], got[499])
	}
	for _, tp := range tapped[2:] {
		if got := first(tp, 5); !slices.Equal(got, []int{0, 200, 400, 600, 800}) {
			t.Errorf("%s tap saw %v", tp.Point(), got)
		}
	}
	if slow.Sampled() != 1 || slow.Dropped() != 499 {
		t.Errorf("the unread tap sampled %d and dropped %d, want 1 and 499", slow.Sampled(), slow.Dropped())
	}
}
