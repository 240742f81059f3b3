package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

// TestWALDurableBeforePipeline holds every append: nothing may be
// processed or acknowledged to the input before its append returned, and
// the WAL entry is acknowledged only after the output accepted the batch.
func TestWALDurableBeforePipeline(t *testing.T) {
	for _, withBuffer := range []bool{false, true} {
		t.Run("buffer="+strconv.FormatBool(withBuffer), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const batches = 6
				ev := &events{}
				in := newInput(batches, 1)
				in.ev = ev
				w := newWAL()
				w.ev, w.gate = ev, make(chan struct{})
				proc := &procFunc{fn: func(_ context.Context, b message.Batch) ([]message.Batch, error) {
					for _, p := range payloads(b) {
						ev.add("proc %s", p)
					}
					return []message.Batch{b}, nil
				}}
				out := &testOutput{name: "out", ev: ev}
				cfg := Config{Input: in, Processors: []component.Processor{proc}, Output: out, WAL: w, ThreadNum: 2}
				if withBuffer {
					cfg.Buffer = newGroupBuffer(1)
				}
				s := mustNew(t, cfg)
				done := runAsync(t.Context(), s)
				synctest.Wait()
				for _, e := range ev.list() {
					if e[:4] == "proc" || e[:3] == "ack" {
						t.Fatalf("%q happened before any append was durable; events %v", e, ev.list())
					}
				}
				if r := in.reads.Load(); r != defaultWALAppendDepth+1 {
					t.Errorf("%d batches read while appends wait, want %d", r, defaultWALAppendDepth+1)
				}
				for range batches {
					w.gate <- struct{}{}
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				in.checkAcks(t)
				if diff := cmp.Diff(seqStrings(0, batches), out.messages()); diff != "" {
					t.Errorf("output (-want +got):\n%s", diff)
				}
				for i := range batches {
					n := strconv.Itoa(i)
					steps := []string{"append " + n, "ack " + n + " <nil>", "proc " + n, "out " + n, "walack " + n}
					last := -1
					for _, step := range steps {
						at := ev.index(step)
						if at <= last {
							t.Errorf("batch %d: %q at %d, not after the previous step (%d); want order %v", i, step, at, last, steps)
						}
						last = at
					}
				}
				if w.pending() != 0 {
					t.Errorf("%d WAL entries left unacknowledged", w.pending())
				}
			})
		})
	}
}

// TestWALReplay checks that entries left from before a restart go through
// the pipeline before new input, and that a failed replay fails the stream.
// Input is read (and made durable) while the replay runs.
func TestWALReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWAL()
		for _, p := range []string{"r0", "r1"} {
			w.put(message.Batch{Messages: []message.Message{message.New([]byte(p))}})
		}
		in := newInput(3, 1)
		out := &testOutput{}
		s := mustNew(t, Config{Input: in, Output: out, WAL: w, ThreadNum: 3})
		if err := s.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"r0", "r1", "0", "1", "2"}, out.messages()); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
		in.checkAcks(t)
		if w.pending() != 0 || s.Status().Received != 5 {
			t.Errorf("pending %d, status %+v", w.pending(), s.Status())
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := newWAL()
		w.replayErr = errors.New("corrupt segment")
		in := newInput(3, 1)
		s := mustNew(t, Config{Input: in, Output: &testOutput{}, WAL: w})
		l := watch(s)
		err := s.Run(t.Context())
		if !errors.Is(err, ErrReplay) || !errors.Is(err, w.replayErr) {
			t.Fatalf("Run: %v, want ErrReplay", err)
		}
		if diff := cmp.Diff([]State{StateStarting, StateRunning, StateStopping, StateFailed}, l.get()); diff != "" {
			t.Errorf("states (-want +got):\n%s", diff)
		}
		// Input read meanwhile is in the WAL: acknowledged, kept for later.
		in.checkAcks(t)
		if int(in.reads.Load()) != w.pending() || in.closes.Load() != 1 {
			t.Errorf("reads %d, WAL entries %d, closes %d", in.reads.Load(), w.pending(), in.closes.Load())
		}
	})
}

// TestWALKeepsAbandoned stops a stream whose output is down: the input is
// acknowledged (the WAL owns the data), the entries stay, and the next run
// delivers them.
func TestWALKeepsAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWAL()
		in := newInput(5, 1)
		in.endless = true
		down := &testOutput{fail: func(int, message.Batch) error { return errors.New("down") }}
		// Appends are numbered in read order, so the replay is in order too.
		s := mustNew(t, Config{Input: in, Output: down, WAL: w, StopTimeout: time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		done := runAsync(ctx, s)
		time.Sleep(time.Minute)
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, ErrStopTimeout) {
			t.Fatalf("Run: %v, want ErrStopTimeout", err)
		}
		in.checkAcks(t)
		if w.pending() != 5 || s.Status().Abandoned != 5 {
			t.Fatalf("pending %d, abandoned %d, want 5", w.pending(), s.Status().Abandoned)
		}

		out := &testOutput{}
		s2 := mustNew(t, Config{Input: newInput(0, 1), Output: out, WAL: w})
		if err := s2.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(seqStrings(0, 5), out.messages()); diff != "" {
			t.Errorf("replayed output (-want +got):\n%s", diff)
		}
		if w.pending() != 0 {
			t.Errorf("%d entries left", w.pending())
		}
	})
}

// TestWALAppendFailed gives a batch whose append failed back to its input
// with the error (it is not durable), paces the next appends, and goes on
// with the batches that follow.
func TestWALAppendFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWAL()
		w.appendErr = func(attempt int) error {
			if attempt <= 2 {
				return errors.New("disk hiccup")
			}
			return nil
		}
		in := newInput(4, 1)
		out := &testOutput{}
		s := mustNew(t, Config{Input: in, Output: out, WAL: w, WALAppendDepth: 1})
		if err := s.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(seqStrings(2, 4), out.messages()); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
		for i := range 4 {
			acks := in.ackCalls(i)
			failed := len(acks) == 1 && errors.Is(acks[0], ErrWALAppend)
			if len(acks) != 1 || failed != (i < 2) {
				t.Errorf("batch %d acknowledged %v", i, acks)
			}
		}
		if st := s.Status(); st.Errors != 2 || st.Retries != 2 || w.pending() != 0 {
			t.Errorf("status %+v, pending %d", st, w.pending())
		}
	})
}

// bigInput produces n batches of one message of size bytes whose payload
// starts with the batch number ("000042"). It keeps a weak pointer to every
// payload, to count how many the stream still holds.
type bigInput struct {
	closer
	n, size int

	mu   sync.Mutex // guards the fields below
	next int
	acks map[int][]error
	live []weak.Pointer[byte]
}

func (in *bigInput) Connect(context.Context) error { return nil }

func (in *bigInput) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if err := ctx.Err(); err != nil {
		return message.Batch{}, nil, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	i := in.next
	if i >= in.n {
		return message.Batch{}, nil, message.ErrEndOfInput
	}
	in.next++
	p := bytes.Repeat([]byte{'x'}, in.size)
	copy(p, fmt.Sprintf("%06d", i))
	in.live = append(in.live, weak.Make(&p[0]))
	ack := func(_ context.Context, err error) error {
		in.mu.Lock()
		in.acks[i] = append(in.acks[i], err)
		in.mu.Unlock()
		return nil
	}
	return message.Batch{Messages: []message.Message{message.New(p)}}, ack, nil
}

// state returns how many batches were read and acknowledged with nil, and
// how many payloads are still reachable.
func (in *bigInput) state() (read, acked, held int) {
	runtime.GC()
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, a := range in.acks {
		if len(a) == 1 && a[0] == nil {
			acked++
		}
	}
	for _, w := range in.live {
		if w.Value() != nil {
			held++
		}
	}
	return in.next, acked, held
}

// TestWALRidesOutOutputOutage keeps an input acknowledged while the output
// is down, until the WAL holds WALMaxBytes not delivered; then the input
// is not read. Meanwhile the stream holds at most WALMemoryBytes of batches
// plus those in flight. When the output comes back, every batch is
// delivered once, in order, part of them read back from the WAL.
func TestWALRidesOutOutputOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			size     = 1000
			total    = 400
			maxBytes = 100 * size // room for 100 batches
			memBytes = 10 * size  // 10 of them in memory
		)
		in := &bigInput{n: total, size: size, acks: map[int][]error{}}
		var up atomic.Bool
		out := &testOutput{fail: func(int, message.Batch) error {
			if !up.Load() {
				return errors.New("503 Service Unavailable")
			}
			return nil
		}}
		w := newWAL()
		s := mustNew(t, Config{Input: in, Output: out, WAL: w, WALMaxBytes: maxBytes, WALMemoryBytes: memBytes})
		done := runAsync(t.Context(), s)

		time.Sleep(time.Minute)
		synctest.Wait()
		read, acked, held := in.state()
		// Every batch the WAL had room for was acknowledged; the next one
		// read waits for room, and nothing more is read.
		if acked != maxBytes/size || read != acked+1 {
			t.Errorf("output down: %d batches read, %d acknowledged; want %d acknowledged and one more read", read, acked, maxBytes/size)
		}
		if got := s.Status().WALBacklogBytes; got != maxBytes {
			t.Errorf("WAL backlog %d bytes, want %d", got, maxBytes)
		}
		// In memory: the queue, the pipeline's 8 slots, the appends under way
		// and the batch waiting for room.
		if limit := memBytes/size + 8 + defaultWALAppendDepth + 1; held > limit {
			t.Errorf("%d of %d batches still in memory, want at most %d", held, read, limit)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if r, _, _ := in.state(); r != read {
			t.Errorf("input read %d more batches while the WAL was full", r-read)
		}

		up.Store(true)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want := make([]string, total)
		for i := range want {
			want[i] = fmt.Sprintf("%06d", i)
		}
		var got []string
		for _, p := range out.messages() {
			got = append(got, p[:6])
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("delivered (-want +got):\n%s", diff)
		}
		read, acked, _ = in.state()
		if read != total || acked != total {
			t.Errorf("%d read, %d acknowledged once with nil, want %d", read, acked, total)
		}
		w.mu.Lock()
		reads := w.reads
		w.mu.Unlock()
		if reads == 0 || w.pending() != 0 || s.Status().WALBacklogBytes != 0 {
			t.Errorf("%d entries read back from the WAL (want some), %d pending, backlog %d bytes", reads, w.pending(), s.Status().WALBacklogBytes)
		}
	})
}
