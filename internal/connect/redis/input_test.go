package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func newInput(t *testing.T, y string) *Input {
	t.Helper()
	in, err := NewInput(conf(t, y), component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	return in.(*Input)
}

func connect(t *testing.T, in *Input) {
	t.Helper()
	if err := in.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(context.Background()) })
}

func read(t *testing.T, in *Input) (message.Batch, message.AckFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, ack, err := in.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return b, ack
}

// readAll reads until want distinct payloads were seen (bounded), acking
// every batch with nil, and returns the duplicates.
func readAll(t *testing.T, in *Input, want int, seen map[string]bool) int {
	t.Helper()
	dups := 0
	for i := 0; len(seen) < want; i++ {
		if i > 10*want {
			t.Fatalf("read %d batches, saw %d of %d", i, len(seen), want)
		}
		b, ack := read(t, in)
		for _, m := range b.Messages {
			p, _ := m.Payload()
			if seen[string(p)] {
				dups++
			}
			seen[string(p)] = true
		}
		if err := ack(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	return dups
}

// TestListAckAndRecover: an acknowledged element leaves the processing
// list; an error ack hands the batch out again; an unacknowledged one is
// moved back to the list by the next Connect.
func TestListAckAndRecover(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	pushN(t, c, "jobs", 30)
	cfg := "mode: {type: single, url: '" + s.url() + "'}\nredis_type: {type: list, list: [jobs]}\nbatch_size: 10"
	in := newInput(t, cfg)
	connect(t, in)

	b1, ack1 := read(t, in)
	if b1.Len() != 10 || b1.Messages[0].Meta.Source != "jobs" || b1.Messages[0].Meta.Fields[MetaKey] != "jobs" {
		t.Fatalf("first batch: %d messages, meta %+v", b1.Len(), b1.Messages[0].Meta)
	}
	if p, _ := b1.Messages[0].Payload(); string(p) != `{"n":0}` {
		t.Errorf("first element %s, want the list's head", p)
	}
	if got := c.LLen(ctx, "jobs:processing").Val(); got != 10 {
		t.Errorf("processing list holds %d, want 10", got)
	}
	_ = ack1(ctx, nil)
	if got := c.LLen(ctx, "jobs:processing").Val(); got != 0 {
		t.Errorf("processing list holds %d after the ack, want 0", got)
	}

	b2, ack2 := read(t, in)
	_ = ack2(ctx, errors.New("output failed"))
	again, ackAgain := read(t, in)
	if p2, _ := b2.Messages[0].Payload(); again.Len() != b2.Len() || string(must(again.Messages[0].Payload())) != string(p2) {
		t.Errorf("after an error ack got %d messages starting %s, want the same batch again", again.Len(), must(again.Messages[0].Payload()))
	}
	_ = ackAgain(ctx, nil)

	b3, _ := read(t, in) // never acknowledged: the process "crashes"
	if b3.Len() != 10 {
		t.Fatalf("third batch has %d", b3.Len())
	}
	in.Close(ctx)
	if got := c.LLen(ctx, "jobs:processing").Val(); got != 10 {
		t.Errorf("processing list holds %d after a crash, want 10", got)
	}

	in2 := newInput(t, cfg)
	connect(t, in2)
	if got := c.LLen(ctx, "jobs:processing").Val(); got != 0 {
		t.Errorf("processing list holds %d after Connect, want 0", got)
	}
	b4, _ := read(t, in2)
	if b4.Len() != 10 || string(must(b4.Messages[0].Payload())) != `{"n":20}` {
		t.Errorf("after recovery got %d starting %s, want the 10 unacknowledged from n=20 in order", b4.Len(), must(b4.Messages[0].Payload()))
	}
}

func must(b []byte, _ error) []byte { return b }

// TestStreamsGroupRestart: entries acknowledged are not read again after
// a restart of the consumer; entries read and not acknowledged (or
// acknowledged with an error) are, first; nothing is lost.
func TestStreamsGroupRestart(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	const n = 100
	xaddN(t, c, "ev", n)
	cfg := "mode: {type: single, url: '" + s.url() + "'}\nredis_type: {type: streams, streams: [ev], group: g, consumer: c1}\nbatch_size: 10"
	in := newInput(t, cfg)
	connect(t, in)
	seen := map[string]bool{}
	var pendingAfter []string
	for i := range 5 {
		b, ack := read(t, in)
		m := b.Messages[0]
		if m.Meta.Source != "ev" || m.Meta.Fields[MetaStreamID] == "" || m.Meta.Fields["origin"] != "test" || m.Meta.Timestamp.IsZero() {
			t.Fatalf("metadata %+v", m.Meta)
		}
		switch i {
		case 0, 1: // acknowledged
			for _, m := range b.Messages {
				seen[string(must(m.Payload()))] = true
			}
			_ = ack(ctx, nil)
		case 2: // failed: handed out again by the next Read
			_ = ack(ctx, errors.New("failed"))
			pendingAfter = append(pendingAfter, string(must(m.Payload())))
		case 3:
			if got := string(must(m.Payload())); got != pendingAfter[0] {
				t.Errorf("after an error ack read %s, want %s again", got, pendingAfter[0])
			}
		case 4: // read, never acknowledged
		}
	}
	in.Close(ctx)
	if p := c.XPending(ctx, "ev", "g").Val(); p.Count != 20 {
		t.Errorf("%d pending after the first consumer, want 20", p.Count)
	}

	in2 := newInput(t, cfg)
	connect(t, in2)
	b, ack := read(t, in2)
	if got := string(must(b.Messages[0].Payload())); got != pendingAfter[0] {
		t.Errorf("first read after restart %s, want the first pending %s", got, pendingAfter[0])
	}
	for _, m := range b.Messages {
		seen[string(must(m.Payload()))] = true
	}
	_ = ack(ctx, nil)
	dups := readAll(t, in2, n, seen)
	if dups != 0 {
		t.Errorf("%d duplicates", dups)
	}
	if p := c.XPending(ctx, "ev", "g").Val(); p.Count != 0 {
		t.Errorf("%d still pending", p.Count)
	}
}

// TestStreamsClaimStale: entries another consumer read and left pending
// longer than claim_min_idle are claimed and delivered.
func TestStreamsClaimStale(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	xaddN(t, c, "ev", 20)
	base := "mode: {type: single, url: '" + s.url() + "'}\nbatch_size: 20\nredis_type: {type: streams, streams: [ev], group: g, "
	dead := newInput(t, base+"consumer: dead}")
	connect(t, dead)
	if b, _ := read(t, dead); b.Len() != 20 {
		t.Fatalf("read %d", b.Len())
	}
	dead.Close(ctx)

	in := newInput(t, base+"consumer: alive, claim_min_idle: 50ms}")
	connect(t, in)
	seen := map[string]bool{}
	if dups := readAll(t, in, 20, seen); dups != 0 {
		t.Errorf("%d duplicates", dups)
	}
	if p := c.XPending(ctx, "ev", "g").Val(); p.Count != 0 {
		t.Errorf("%d still pending", p.Count)
	}
}

// TestStreamsDeletedPending: an entry deleted while pending is
// acknowledged and skipped, not delivered empty.
func TestStreamsDeletedPending(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	xaddN(t, c, "ev", 3)
	cfg := "mode: {type: single, url: '" + s.url() + "'}\nredis_type: {type: streams, streams: [ev], group: g, consumer: c1}"
	in := newInput(t, cfg)
	connect(t, in)
	b, _ := read(t, in)
	in.Close(ctx)
	c.XDel(ctx, "ev", b.Messages[0].Meta.Fields[MetaStreamID])
	c.XAdd(ctx, &goredis.XAddArgs{Stream: "ev", Values: []any{"a", "1", "b", "2"}})

	in2 := newInput(t, cfg)
	connect(t, in2)
	var got []string
	for len(got) < 3 {
		b, ack := read(t, in2)
		for _, m := range b.Messages {
			got = append(got, string(must(m.Payload())))
		}
		_ = ack(ctx, nil)
	}
	want := []string{`{"n":1}`, `{"n":2}`, `{"a":"1","b":"2"}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestConnectDown: Connect to a server that is down fails within its dial
// timeouts, naming Redis and the address; it succeeds once the server is up.
func TestConnectDown(t *testing.T) {
	s := newServer(t)
	for _, y := range []string{
		"redis_type: {type: list, list: [a]}",
		"redis_type: {type: subscribe, subscribe: {type: channels, channels: [a]}}",
		"redis_type: {type: streams, streams: [a], group: g}",
	} {
		in := newInput(t, "mode: {type: single, url: '"+s.url()+"'}\n"+y)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := in.Connect(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "redis input") || !strings.Contains(err.Error(), s.addr()) {
			t.Errorf("%s: Connect error %v, want one naming redis and %s", y, err, s.addr())
		}
		in.Close(context.Background())
	}
	out, _ := NewOutput(conf(t, "mode: {type: single, url: '"+s.url()+"'}\nredis_type: {type: list, key: k}"), component.Resources{})
	if err := out.Connect(context.Background()); err == nil || !strings.Contains(err.Error(), "redis output") {
		t.Errorf("output Connect error %v", err)
	}
	s.start()
	if err := out.Connect(context.Background()); err != nil {
		t.Errorf("output Connect after the server started: %v", err)
	}
	out.Close(context.Background())
}
