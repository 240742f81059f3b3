package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"
)

func TestStreamOrderAndEOF(t *testing.T) {
	const frames = 2000
	tests := []struct {
		name         string
		receiveFirst bool
		dir          string // "ab": a sends to b (the dialer sends)
	}{
		{"send before receive, dialer sends", false, "ab"},
		{"receive before send, dialer sends", true, "ab"},
		{"send before receive, acceptor sends", false, "ba"},
		{"receive before send, acceptor sends", true, "ba"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, nil)
			from, to, fromID, toID := p.ma, p.mb, "a", "b"
			if tc.dir == "ba" {
				from, to, fromID, toID = p.mb, p.ma, "b", "a"
			}
			ctx := ctxT(t, 20*time.Second)
			var rcv *Receiver
			var err error
			if tc.receiveFirst {
				// Before the link is up: the claim waits for it.
				if rcv, err = to.Receive(fromID, "edge-0/0-1/attempt-1", "edge-0"); err != nil {
					t.Fatal(err)
				}
			}
			snd, err := from.Send(ctx, toID, "edge-0/0-1/attempt-1", "edge-0")
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				for i := range frames {
					if err := snd.Send(ctx, seqFrame(i)); err != nil {
						errc <- err
						return
					}
				}
				errc <- snd.Close()
			}()
			if !tc.receiveFirst {
				// Let the open frame arrive first, so the stream is held
				// unclaimed on the link.
				waitFor(t, 5*time.Second, "the stream opened", func() bool {
					return p.statusStreams(to, fromID) == 1
				})
				if rcv, err = to.Receive(fromID, "edge-0/0-1/attempt-1", "edge-0"); err != nil {
					t.Fatal(err)
				}
			}
			for i := range frames {
				f, err := rcv.Recv(ctx)
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if got := seqOf(t, f); got != i {
					t.Fatalf("frame %d carries %d", i, got)
				}
			}
			if _, err := rcv.Recv(ctx); err != io.EOF {
				t.Fatalf("after the last frame: %v, want io.EOF", err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if err := rcv.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := rcv.Recv(ctx); !errors.Is(err, ErrClosed) {
				t.Fatalf("Recv after Close: %v, want ErrClosed", err)
			}
			want := float64(frames * 8)
			for _, dir := range []string{"sent", "received"} {
				got := metricValue(t, p.reg, "svc_dataplane_bytes_total", map[string]string{"job": testJob, "channel": "edge-0", "direction": dir})
				if got != want {
					t.Errorf("bytes %s = %v, want %v", dir, got, want)
				}
				got = metricValue(t, p.reg, "svc_dataplane_batches_total", map[string]string{"job": testJob, "channel": "edge-0", "direction": dir})
				if got != frames {
					t.Errorf("batches %s = %v, want %v", dir, got, frames)
				}
			}
			waitFor(t, 5*time.Second, "the streams released", func() bool {
				return p.statusStreams(p.ma, "b") == 0 && p.statusStreams(p.mb, "a") == 0
			})
			_ = p.ma.Close()
			_ = p.mb.Close()
			if got := metricValue(t, p.reg, "svc_dataplane_bytes_total", map[string]string{"job": testJob}); got != -1 {
				t.Errorf("bytes series of a closed mesh still there: %v", got)
			}
		})
	}
}

// statusStreams is the stream count of m's link to peer, from Status.
func (p *pair) statusStreams(m *Mesh, peer string) int {
	st := m.impl.status()
	for _, l := range st.Links {
		if l.Node == peer {
			return l.Streams
		}
	}
	return -1
}

func TestSlowReceiverStallsOnlyItsStream(t *testing.T) {
	p := newPair(t, nil)
	ctx := ctxT(t, 20*time.Second)
	slowR, err := p.mb.Receive("a", "slow", "slow")
	if err != nil {
		t.Fatal(err)
	}
	defer slowR.Close()
	slow, err := p.ma.Send(ctx, "b", "slow", "slow")
	if err != nil {
		t.Fatal(err)
	}
	// The slow stream's sender fills its credit and then waits.
	slowCtx, cancelSlow := context.WithCancel(ctx)
	slowDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			if err := slow.Send(slowCtx, seqFrame(i)); err != nil {
				slowDone <- err
				return
			}
		}
	}()
	waitFor(t, 5*time.Second, "the slow sender to wait for credit", func() bool {
		return p.a.Status().Jobs[0].Links[0].CreditWaits == 1
	})
	if got := metricValue(t, p.reg, "svc_dataplane_credit_waiting", map[string]string{"job": testJob, "channel": "slow"}); got != 1 {
		t.Errorf("credit_waiting{slow} = %v, want 1", got)
	}

	fastR, err := p.mb.Receive("a", "fast", "fast")
	if err != nil {
		t.Fatal(err)
	}
	fast, err := p.ma.Send(ctx, "b", "fast", "fast")
	if err != nil {
		t.Fatal(err)
	}
	const frames = 1000
	go func() {
		for i := range frames {
			if err := fast.Send(ctx, seqFrame(i)); err != nil {
				return
			}
		}
		_ = fast.Close()
	}()
	for i := range frames {
		f, err := fastR.Recv(ctx)
		if err != nil {
			t.Fatalf("fast frame %d: %v", i, err)
		}
		if seqOf(t, f) != i {
			t.Fatalf("fast frame %d out of order", i)
		}
	}
	if _, err := fastR.Recv(ctx); err != io.EOF {
		t.Fatalf("fast stream end: %v", err)
	}
	select {
	case err := <-slowDone:
		t.Fatalf("slow sender returned %v while its receiver read nothing", err)
	default:
	}
	// The slow receiver now reads what it holds: exactly its credit.
	for i := range 16 {
		f, err := slowR.Recv(ctx)
		if err != nil || seqOf(t, f) != i {
			t.Fatalf("slow frame %d: %v", i, err)
		}
	}
	cancelSlow()
	if err := <-slowDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("slow sender: %v, want context.Canceled", err)
	}
	if got := metricValue(t, p.reg, "svc_dataplane_backpressure_seconds_total", map[string]string{"job": testJob, "channel": "slow"}); got <= 0 {
		t.Errorf("backpressure seconds of the slow channel = %v, want > 0", got)
	}
}

func TestReceiverCloseStopsSender(t *testing.T) {
	p := newPair(t, nil)
	ctx := ctxT(t, 10*time.Second)
	r, err := p.mb.Receive("a", "s", "l")
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.ma.Send(ctx, "b", "s", "l")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, seqFrame(0)); err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	var sendErr error
	for i := 1; i < 1000 && sendErr == nil; i++ {
		sendErr = s.Send(ctx, seqFrame(i))
	}
	if !errors.Is(sendErr, ErrClosed) {
		t.Fatalf("Send after the receiver closed: %v, want ErrClosed", sendErr)
	}
	_ = s.Close()
	// The link survives: another stream works.
	r2, _ := p.mb.Receive("a", "s2", "l")
	s2, err := p.ma.Send(ctx, "b", "s2", "l")
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Send(ctx, seqFrame(7)); err != nil {
		t.Fatal(err)
	}
	if f, err := r2.Recv(ctx); err != nil || seqOf(t, f) != 7 {
		t.Fatalf("second stream: %v", err)
	}
}

func TestManyStreamsConcurrently(t *testing.T) {
	p := newPair(t, nil)
	ctx := ctxT(t, 30*time.Second)
	const streams, frames = 8, 300
	var wg sync.WaitGroup
	errc := make(chan error, 2*streams)
	for k := range streams {
		name := fmt.Sprintf("s%d", k)
		// Half the streams go each way.
		from, to, fromID, toID := p.ma, p.mb, "a", "b"
		if k%2 == 1 {
			from, to, fromID, toID = p.mb, p.ma, "b", "a"
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			s, err := from.Send(ctx, toID, name, "edge")
			if err != nil {
				errc <- err
				return
			}
			for i := range frames {
				if err := s.Send(ctx, seqFrame(i)); err != nil {
					errc <- err
					return
				}
			}
			_ = s.Close()
		}()
		go func() {
			defer wg.Done()
			r, err := to.Receive(fromID, name, "edge")
			if err != nil {
				errc <- err
				return
			}
			for i := range frames {
				f, err := r.Recv(ctx)
				if err != nil {
					errc <- err
					return
				}
				if got := int(f.Payload[7]) | int(f.Payload[6])<<8; got != i {
					errc <- fmt.Errorf("%s: frame %d carries %d", name, i, got)
					return
				}
			}
			if _, err := r.Recv(ctx); err != io.EOF {
				errc <- fmt.Errorf("%s: end %v", name, err)
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

func TestSendValidation(t *testing.T) {
	p := newPair(t, func(o *Options) { o.MaxFrame = 1024 })
	ctx := ctxT(t, 10*time.Second)
	if _, err := p.ma.Send(ctx, "nobody", "s", "l"); err == nil {
		t.Error("Send to an unknown peer succeeded")
	}
	if _, err := p.ma.Receive("nobody", "s", "l"); err == nil {
		t.Error("Receive from an unknown peer succeeded")
	}
	if _, err := p.ma.Send(ctx, "b", "", "l"); err == nil {
		t.Error("Send of an empty name succeeded")
	}
	s, err := p.ma.Send(ctx, "b", "s", "l")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ma.Send(ctx, "b", "s", "l"); err == nil {
		t.Error("a second Send of the same name succeeded")
	}
	if err := s.Send(ctx, Frame{Kind: KindBatch, Payload: make([]byte, 1025)}); err == nil {
		t.Error("a frame over MaxFrame was sent")
	}
	if err := s.Send(ctx, Frame{Kind: 0}); err == nil {
		t.Error("a frame of kind 0 was sent")
	}
	if _, err := p.mb.Receive("a", "r", "l"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.mb.Receive("a", "r", "l"); err == nil {
		t.Error("a second Receive of the same name succeeded")
	}
	_ = p.ma.Close()
	if _, err := p.ma.Send(ctx, "b", "t", "l"); !errors.Is(err, ErrClosed) {
		t.Errorf("Send on a closed mesh: %v, want ErrClosed", err)
	}
	if err := s.Send(ctx, seqFrame(1)); !isBroken(err) || !errors.Is(err, ErrClosed) {
		t.Errorf("stream Send after mesh Close: %v, want ErrLinkBroken and ErrClosed", err)
	}
}

func TestStatusAndLinkGauge(t *testing.T) {
	p := newPair(t, nil)
	up := func() float64 {
		return metricValue(t, p.reg, "svc_dataplane_links", map[string]string{"state": LinkUp})
	}
	waitFor(t, 5*time.Second, "both ends up", func() bool { return up() == 2 })
	if _, err := p.mb.Receive("a", "x", "e"); err != nil {
		t.Fatal(err)
	}
	st := p.b.Status()
	if st.Address != p.b.Addr() || len(st.Jobs) != 1 || st.Jobs[0].Job != testJob {
		t.Fatalf("status %+v", st)
	}
	l := st.Jobs[0].Links[0]
	if l.Node != "a" || l.State != LinkUp || l.Streams != 1 || l.Since.IsZero() {
		t.Fatalf("link status %+v", l)
	}
	_ = p.ma.Close()
	_ = p.mb.Close()
	if got := up(); got != 0 {
		t.Fatalf("links{up} = %v after both meshes closed", got)
	}
	if n := len(p.a.Status().Jobs); n != 0 {
		t.Fatalf("%d jobs after Close", n)
	}
}
