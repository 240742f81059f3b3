package store

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/pgtest"
)

func TestNotifyPayload(t *testing.T) {
	big := map[string]bool{}
	for i := range 2000 {
		big["n:node-"+strconv.Itoa(i)] = true
	}
	for _, tc := range []struct {
		name    string
		notes   map[string]bool
		events  bool
		want    string
		changes []Change
	}{
		{"nothing", map[string]bool{}, false, "", nil},
		{"events only", map[string]bool{}, true, "hub-a\ne:", []Change{{Kind: ChangeEvents}}},
		{"sorted", map[string]bool{"n:n2": true, "a:n1": true}, false, "hub-a\na:n1\nn:n2",
			[]Change{{Kind: ChangeAttempts, NodeID: "n1"}, {Kind: ChangeNode, NodeID: "n2"}}},
		{"too much says all", big, false, "hub-a\n*:", []Change{{Kind: ChangeAll}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := notifyPayload("hub-a", tc.notes, tc.events)
			if got != tc.want {
				t.Fatalf("payload %q, want %q", got, tc.want)
			}
			if got == "" {
				return
			}
			origin, changes := parsePayload(got)
			if origin != "hub-a" || !slices.Equal(changes, tc.changes) {
				t.Fatalf("parsed %q %+v, want %+v", origin, changes, tc.changes)
			}
		})
	}
}

// TestWatchOtherStore: a store watching a PostgreSQL database hears
// ChangeAll when it starts listening, then the notes of another store's
// committed writes, and neither its own nor those of a write that failed.
func TestWatchOtherStore(t *testing.T) {
	pgtest.Shared(t)
	url := newPostgresDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(origin string) *Store {
		s, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		s.SetOrigin(origin)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open("hub-a"), open("hub-b")
	got := make(chan []Change, 16)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.Watch(wctx, func(c []Change) { got <- c }) }()
	defer func() { stop(); <-done }()
	next := func() []Change {
		t.Helper()
		select {
		case c := <-got:
			return c
		case <-ctx.Done():
			t.Fatal("no notification")
			return nil
		}
	}
	if c := next(); !slices.Equal(c, []Change{{Kind: ChangeAll}}) {
		t.Fatalf("first: %+v", c)
	}
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	// Its own write is passed over; the other store's is heard.
	if err := a.RegisterNode(ctx, reg("n0", "tok0", t0)); err != nil {
		t.Fatal(err)
	}
	if err := b.RegisterNode(ctx, reg("n1", "tok1", t0)); err != nil {
		t.Fatal(err)
	}
	if c := next(); !slices.Equal(c, []Change{{Kind: ChangeEvents}, {Kind: ChangeNode, NodeID: "n1"}}) {
		t.Fatalf("register on the other store: %+v", c)
	}
	// A write that fails notes nothing; the next one is heard alone.
	if err := b.Heartbeat(ctx, "missing", nil, "", "", t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("heartbeat of an unknown node: %v", err)
	}
	if err := b.Heartbeat(ctx, "n1", nil, "", "", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if c := next(); !slices.Equal(c, []Change{{Kind: ChangeNode, NodeID: "n1"}}) {
		t.Fatalf("heartbeat: %+v", c)
	}
}
