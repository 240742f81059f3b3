package dataplane

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// floodConns is how many connections the flood test opens: enough to be
// far over the handshake limits, few enough for a test's descriptors.
const floodConns = 2000

// raiseFileLimit lifts the soft limit on open files to the hard one: a
// flood needs a descriptor per connection on both ends.
func raiseFileLimit(t testing.TB, need uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	if rl.Cur < need {
		t.Skipf("open file limit %d, the flood needs %d", rl.Cur, need)
	}
}

// floodSource is the loopback address the flood comes from: 127.0.0.2 when
// the host routes all of 127/8 to loopback (Linux), so the flood's
// per-address limit is its own; else 127.0.0.1.
func floodSource() *net.TCPAddr {
	if c, err := net.ListenPacket("udp", "127.0.0.2:0"); err == nil {
		_ = c.Close()
		return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	}
	return nil
}

// flood opens n connections to addr, writes a few bytes on each (a
// connection that starts and never finishes), and holds them until ctx
// ends. It returns how many connected.
func flood(ctx context.Context, addr string, n int) int {
	var mu sync.Mutex
	connected := 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, 128)
	d := net.Dialer{Timeout: 2 * time.Second}
	if src := floodSource(); src != nil {
		d.LocalAddr = src
	}
	for range n {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.DialContext(ctx, "tcp", addr)
			<-sem
			if err != nil {
				return
			}
			defer c.Close()
			mu.Lock()
			connected++
			mu.Unlock()
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte{22, 3, 1, 0, 200}) // a TLS record header, then nothing
			<-ctx.Done()
		}()
	}
	wg.Wait()
	return connected
}

// TestFlood: thousands of connections to a node's data port that never
// authenticate are closed at accept beyond the handshake limits, counted
// and logged sampled, while a link that was up keeps carrying frames.
func TestFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("opens thousands of connections")
	}
	raiseFileLimit(t, 3*floodConns)
	var logs syncBuffer
	p := newPair(t, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		o.HeartbeatTimeout = 3 * time.Second
	})
	ctx := ctxT(t, 60*time.Second)
	r, err := p.mb.Receive("a", "edge", "edge")
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.ma.Send(ctx, "b", "edge", "edge")
	if err != nil {
		t.Fatal(err)
	}
	// The job: a sender and a receiver, counting frames.
	var mu sync.Mutex
	received := 0
	stop := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				_ = s.Close()
				return
			default:
			}
			if s.Send(ctx, seqFrame(i)) != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	go func() {
		for {
			if _, err := r.Recv(ctx); err != nil {
				return
			}
			mu.Lock()
			received++
			mu.Unlock()
		}
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return received
	}
	waitFor(t, 10*time.Second, "frames before the flood", func() bool { return count() > 10 })

	fctx, endFlood := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() { done <- flood(fctx, p.b.Addr(), floodConns) }()
	before := count()
	waitFor(t, 30*time.Second, "capacity refusals", func() bool { return refusedCount(t, p.reg, reasonCapacity) >= floodConns/2 })
	if hs := p.b.Status().Handshakes; hs > 64 {
		t.Errorf("%d handshakes at once, over the limit of 64", hs)
	}
	waitFor(t, 10*time.Second, "frames during the flood", func() bool { return count() > before+50 })
	if !p.ma.Up("b") {
		t.Error("the job's link went down during the flood")
	}
	endFlood()
	n := <-done
	close(stop)
	refused := refusedCount(t, p.reg, reasonCapacity)
	lines := strings.Count(logs.String(), "data plane connections refused")
	t.Logf("%d flood connections, %v refused at accept, %d refusal log lines, %d frames received", n, refused, lines, count())
	if lines == 0 || lines > 10 {
		t.Errorf("%d refusal log lines for %v refusals: want them sampled", lines, refused)
	}
}
