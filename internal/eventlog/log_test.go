package eventlog

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/wire"
)

func TestAppendAssignsIDAndTime(t *testing.T) {
	clock := newFakeClock()
	given := wire.At(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name   string
		lastID int64
		in     wire.Event
		want   wire.Event
	}{
		{
			name: "fresh log starts at 1, stamps the clock to the millisecond",
			in:   wire.Event{Kind: wire.EventNodeStarted},
			want: wire.Event{ID: 1, Kind: wire.EventNodeStarted, OccurredAt: wire.At(clock.Now().Truncate(time.Millisecond))},
		},
		{
			name:   "restored log continues its sequence",
			lastID: 41,
			in:     wire.Event{Kind: wire.EventNodeStarted},
			want:   wire.Event{ID: 42, Kind: wire.EventNodeStarted, OccurredAt: wire.At(clock.Now().Truncate(time.Millisecond))},
		},
		{
			name: "a caller's id is replaced, its time kept",
			in:   wire.Event{ID: 99, Kind: wire.EventCommandFailed, OccurredAt: given, Outcome: "failed"},
			want: wire.Event{ID: 1, Kind: wire.EventCommandFailed, OccurredAt: given, Outcome: "failed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(Options{Now: clock.Now, LastID: tt.lastID})
			got := l.Append(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Append returned (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]wire.Event{tt.want}, l.Query(Filter{}, 1, 10).Items); diff != "" {
				t.Errorf("stored (-want +got):\n%s", diff)
			}
			if l.LastID() != tt.want.ID {
				t.Errorf("LastID = %d, want %d", l.LastID(), tt.want.ID)
			}
		})
	}
}

func TestAppendConcurrent(t *testing.T) {
	const writers, each = 8, 500
	l := New(Options{Capacity: writers * each})
	got := make([][]int64, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for range each {
				got[w] = append(got[w], l.Append(wire.Event{Kind: "k"}).ID)
			}
		})
	}
	wg.Wait()
	var all []int64
	for w, g := range got {
		if !slices.IsSorted(g) {
			t.Errorf("writer %d saw ids out of order: %v", w, g)
		}
		all = append(all, g...)
	}
	slices.Sort(all)
	if diff := cmp.Diff(seq(1, writers*each, 1), all); diff != "" {
		t.Errorf("ids handed out (-want +got):\n%s", diff)
	}
	page := l.Query(Filter{}, 1, writers*each)
	if diff := cmp.Diff(seq(writers*each, 1, -1), ids(page.Items)); diff != "" {
		t.Errorf("stored ids, newest first (-want +got):\n%s", diff)
	}
}

func TestCapacity(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		appends  int
		wantLen  int
	}{
		{"default capacity is the spec's 2048", 0, 2100, DefaultCapacity},
		{"below capacity keeps all", 5, 3, 3},
		{"exactly full", 5, 5, 5},
		{"wraps several times", 5, 23, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(Options{Capacity: tt.capacity})
			for range tt.appends {
				l.Append(wire.Event{Kind: "k"})
			}
			if l.Len() != tt.wantLen {
				t.Errorf("Len = %d, want %d", l.Len(), tt.wantLen)
			}
			page := l.Query(Filter{}, 1, 10000)
			want := seq(int64(tt.appends), int64(tt.appends-tt.wantLen+1), -1)
			if diff := cmp.Diff(want, ids(page.Items)); diff != "" {
				t.Errorf("retained ids (-want +got):\n%s", diff)
			}
			if page.Total != tt.wantLen {
				t.Errorf("Total = %d, want %d", page.Total, tt.wantLen)
			}
		})
	}
}

func TestInsert(t *testing.T) {
	l := New(Options{Capacity: 3, LastID: 9})
	for _, id := range []int64{10, 12, 20, 21} {
		if _, err := l.Insert(wire.Event{ID: id, Kind: "k"}); err != nil {
			t.Fatalf("Insert(%d): %v", id, err)
		}
	}
	for _, id := range []int64{21, 15, 0} {
		if _, err := l.Insert(wire.Event{ID: id, Kind: "k"}); !errors.Is(err, ErrOutOfOrder) {
			t.Errorf("Insert(%d) = %v, want ErrOutOfOrder", id, err)
		}
	}
	if got := l.Append(wire.Event{Kind: "k"}).ID; got != 22 {
		t.Errorf("Append after Insert got id %d, want 22", got)
	}
	if diff := cmp.Diff([]int64{22, 21, 20}, ids(l.Query(Filter{}, 1, 10).Items)); diff != "" {
		t.Errorf("retained (-want +got):\n%s", diff)
	}
}

func TestQuery(t *testing.T) {
	clock := newFakeClock()
	t0 := clock.Now()
	l := New(Options{Now: clock.Now})
	// Ten events, one second apart: ids 1..10.
	for i := range 10 {
		ev := wire.Event{Kind: wire.EventStreamStateChanged, ResourceID: "s1", NodeID: "n1"}
		switch i % 3 {
		case 1:
			ev = wire.Event{Kind: wire.EventIntentAccepted, ResourceID: "s2", OperationID: "op-a", CorrelationID: "c-1"}
		case 2:
			ev = wire.Event{Kind: wire.EventCommandSucceeded, ResourceID: "s2", OperationID: "op-a", CorrelationID: "c-2", NodeID: "n2"}
		}
		l.Append(ev)
		clock.Advance(time.Second)
	}
	tests := []struct {
		name      string
		f         Filter
		page, per int
		wantIDs   []int64
		wantTotal int
		wantPage  int
		wantPer   int
	}{
		{name: "all, newest first", per: 100, wantIDs: seq(10, 1, -1), wantTotal: 10, wantPage: 1, wantPer: 100},
		{name: "defaults for page and page size", page: 0, per: 0, wantIDs: seq(10, 1, -1), wantTotal: 10, wantPage: 1, wantPer: DefaultPageSize},
		{name: "first page", page: 1, per: 3, wantIDs: []int64{10, 9, 8}, wantTotal: 10, wantPage: 1, wantPer: 3},
		{name: "last partial page", page: 4, per: 3, wantIDs: []int64{1}, wantTotal: 10, wantPage: 4, wantPer: 3},
		{name: "past the end", page: 5, per: 3, wantIDs: []int64{}, wantTotal: 10, wantPage: 5, wantPer: 3},
		{name: "huge page does not overflow", page: 1 << 62, per: 100, wantIDs: []int64{}, wantTotal: 10, wantPage: 1 << 62, wantPer: 100},
		{name: "one kind", f: Filter{Kinds: []string{wire.EventIntentAccepted}}, per: 50, wantIDs: []int64{8, 5, 2}, wantTotal: 3, wantPage: 1, wantPer: 50},
		{name: "two kinds, paged", f: Filter{Kinds: []string{wire.EventIntentAccepted, wire.EventCommandSucceeded}}, page: 2, per: 2, wantIDs: []int64{6, 5}, wantTotal: 6, wantPage: 2, wantPer: 2},
		{name: "node_id", f: Filter{NodeID: "n2"}, per: 50, wantIDs: []int64{9, 6, 3}, wantTotal: 3, wantPage: 1, wantPer: 50},
		{name: "resource_id", f: Filter{ResourceID: "s1"}, per: 50, wantIDs: []int64{10, 7, 4, 1}, wantTotal: 4, wantPage: 1, wantPer: 50},
		{name: "operation_id and correlation_id", f: Filter{OperationID: "op-a", CorrelationID: "c-2"}, per: 50, wantIDs: []int64{9, 6, 3}, wantTotal: 3, wantPage: 1, wantPer: 50},
		{name: "after id", f: Filter{AfterID: 7}, per: 50, wantIDs: []int64{10, 9, 8}, wantTotal: 3, wantPage: 1, wantPer: 50},
		{name: "after the newest", f: Filter{AfterID: 10}, per: 50, wantIDs: []int64{}, wantTotal: 0, wantPage: 1, wantPer: 50},
		{name: "since a time, inclusive", f: Filter{Since: t0.Add(7 * time.Second).Truncate(time.Millisecond)}, per: 50, wantIDs: []int64{10, 9, 8}, wantTotal: 3, wantPage: 1, wantPer: 50},
		{name: "filters combine", f: Filter{ResourceID: "s2", Kinds: []string{wire.EventCommandSucceeded}, AfterID: 3}, per: 50, wantIDs: []int64{9, 6}, wantTotal: 2, wantPage: 1, wantPer: 50},
		{name: "nothing matches", f: Filter{NodeID: "nope"}, per: 50, wantIDs: []int64{}, wantTotal: 0, wantPage: 1, wantPer: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := l.Query(tt.f, tt.page, tt.per)
			if got.Items == nil {
				t.Fatal("Items is nil, want a non-nil slice")
			}
			if diff := cmp.Diff(tt.wantIDs, ids(got.Items)); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if got.Total != tt.wantTotal || got.Page != tt.wantPage || got.PageSize != tt.wantPer {
				t.Errorf("total, page, page_size = %d, %d, %d; want %d, %d, %d",
					got.Total, got.Page, got.PageSize, tt.wantTotal, tt.wantPage, tt.wantPer)
			}
			for _, ev := range got.Items {
				if !tt.f.Match(ev) {
					t.Errorf("event %d does not match the filter", ev.ID)
				}
			}
		})
	}
}
