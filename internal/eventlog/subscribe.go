package eventlog

import (
	"context"

	"github.com/flowplane/flowplane/internal/wire"
)

// Live is the afterID that subscribes to events appended after Subscribe
// only, with no replay.
const Live int64 = -1

// Delivery is one item a Subscription yields: an event, or a resync marker.
type Delivery struct {
	// Event is the next matching event; zero when Resync is set.
	Event wire.Event
	// Resync reports that events the subscriber has not seen were dropped
	// before it read them (its after-id was older than the oldest retained
	// event, or it fell more than the log's capacity behind), or that its
	// after-id is newer than the newest event, so it belongs to another log
	// (such as the same node's before a restart). Either way the
	// subscription continues with the retained events from OldestID on; the
	// subscriber should refresh whatever it derived from earlier events.
	Resync bool
	// OldestID is, with Resync, the id of the oldest retained event, or the
	// next id to be assigned when none is retained.
	OldestID int64
}

// Subscription reads every event after an id, in id order: the retained
// ones first, then live ones as they are added, each once, with a resync
// marker wherever events were dropped before it read them. It has no buffer
// or goroutine of its own: it keeps a cursor into the Log's ring, so the
// ring's capacity is how far it may fall behind before a resync, and Append
// never waits for it. A Subscription is read by one goroutine at a time; it
// ends when the context given to Subscribe ends and needs no closing.
type Subscription struct {
	log    *Log
	ctx    context.Context
	filter Filter
	cursor int64 // id of the last event delivered or skipped
	resync bool  // a resync marker is due before the next event
}

// Subscribe returns a Subscription to the events after afterID that match
// f, or, with afterID Live (any negative value), to those added from now
// on. The subscription ends when ctx ends.
func (l *Log) Subscribe(ctx context.Context, afterID int64, f Filter) *Subscription {
	s := &Subscription{log: l, ctx: ctx, filter: f}
	l.mu.RLock()
	defer l.mu.RUnlock()
	switch {
	case afterID < 0:
		s.cursor = l.lastID
	case afterID > l.lastID:
		s.cursor, s.resync = l.dropped, true
	default:
		s.cursor = afterID
	}
	return s
}

// Next returns the next delivery, waiting for one if need be. It returns
// the context's error once ctx or the subscription's context ends; after the
// subscription's context ended it returns nothing else.
func (s *Subscription) Next(ctx context.Context) (Delivery, error) {
	for {
		if err := s.ctx.Err(); err != nil {
			return Delivery{}, err
		}
		if err := ctx.Err(); err != nil {
			return Delivery{}, err
		}
		d, ok, wait := s.poll()
		if ok {
			return d, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
		case <-s.ctx.Done():
		}
	}
}

// poll returns the next delivery if one is ready; otherwise it returns a
// channel closed when the log next changes.
func (s *Subscription) poll() (Delivery, bool, <-chan struct{}) {
	l := s.log
	l.mu.RLock()
	defer l.mu.RUnlock()
	if s.resync || s.cursor < l.dropped {
		s.resync = false
		s.cursor = max(s.cursor, l.dropped)
		return Delivery{Resync: true, OldestID: l.oldestID()}, true, nil
	}
	for i := l.firstAfter(s.cursor); i < len(l.buf); i++ {
		ev := l.at(i)
		s.cursor = ev.ID
		if s.filter.match(ev) {
			return Delivery{Event: *ev}, true, nil
		}
	}
	return Delivery{}, false, l.waitChan()
}
