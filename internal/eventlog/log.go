package eventlog

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// DefaultCapacity is the number of events a Log keeps unless told otherwise:
// the specification's "events kept: newest 2048 rows".
const DefaultCapacity = 2048

// DefaultPageSize is the page size Query uses when given one below 1.
const DefaultPageSize = 50

// ErrOutOfOrder is returned by Insert for an event whose id is not above the
// log's last id.
var ErrOutOfOrder = errors.New("event id is not above the log's last id")

// Options configure a Log. The zero value is a log of DefaultCapacity events
// on the wall clock whose first id is 1.
type Options struct {
	// Capacity is the number of newest events kept; below 1 means
	// DefaultCapacity.
	Capacity int
	// Now stamps OccurredAt on appended events that have none; nil means
	// time.Now.
	Now func() time.Time
	// LastID is the id the sequence continues after, for a log restored from
	// storage: the first Append gets LastID+1 (a negative LastID counts as 0). Events with an id up to
	// LastID count as dropped, so a subscriber asking for events after an
	// older id starts with a resync marker. To restore a retained tail, set
	// LastID to the id before its first event and Insert the events in order.
	LastID int64
}

// Log is a bounded event log with live fan-out. It is safe for concurrent
// use. Events handed to it, and the Data maps inside them, must not be
// modified afterwards; events it hands out share those maps and are read-only.
type Log struct {
	now func() time.Time

	mu      sync.RWMutex // guards the fields below
	buf     []wire.Event // ring of retained events, oldest at head once full
	head    int          // index in buf of the oldest event when len(buf) == cap(buf)
	lastID  int64        // id of the newest event ever added (or Options.LastID)
	dropped int64        // highest id known to be no longer retained

	wakeMu sync.Mutex    // guards wake; taken after mu when both are held
	wake   chan struct{} // closed on the next add; nil while nobody waits
}

// New returns an empty Log.
func New(opts Options) *Log {
	capacity := opts.Capacity
	if capacity < 1 {
		capacity = DefaultCapacity
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	last := max(opts.LastID, 0)
	return &Log{
		now:     now,
		buf:     make([]wire.Event, 0, capacity),
		lastID:  last,
		dropped: last,
	}
}

// Append stores ev as the newest event and returns it as stored: with the
// next id (any ID it carries is replaced) and, when OccurredAt is zero, the
// clock's time in UTC to the millisecond. The oldest event is dropped when
// the log is full. Append never waits for subscribers.
func (l *Log) Append(ev wire.Event) wire.Event {
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = wire.At(l.now().UTC().Truncate(time.Millisecond))
	}
	l.mu.Lock()
	l.lastID++
	ev.ID = l.lastID
	l.add(ev)
	l.mu.Unlock()
	l.notify()
	return ev
}

// Insert stores an event whose id was assigned elsewhere, such as by a
// durable store that commits events before they go live. Its ID must be
// above LastID (ids need not be contiguous); otherwise Insert stores nothing
// and returns an error wrapping ErrOutOfOrder. A zero OccurredAt is stamped
// as in Append. Callers feed events in commit order.
func (l *Log) Insert(ev wire.Event) (wire.Event, error) {
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = wire.At(l.now().UTC().Truncate(time.Millisecond))
	}
	l.mu.Lock()
	if ev.ID <= l.lastID {
		last := l.lastID
		l.mu.Unlock()
		return wire.Event{}, fmt.Errorf("%w: id %d, last id %d", ErrOutOfOrder, ev.ID, last)
	}
	l.lastID = ev.ID
	l.add(ev)
	l.mu.Unlock()
	l.notify()
	return ev, nil
}

// add puts ev into the ring, dropping the oldest event when full. l.mu is
// held for writing.
func (l *Log) add(ev wire.Event) {
	if len(l.buf) < cap(l.buf) {
		l.buf = append(l.buf, ev)
		return
	}
	l.dropped = l.buf[l.head].ID
	l.buf[l.head] = ev
	l.head = (l.head + 1) % len(l.buf)
}

// notify wakes every subscriber waiting for a new event.
func (l *Log) notify() {
	l.wakeMu.Lock()
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
	l.wakeMu.Unlock()
}

// waitChan returns a channel closed by the next add. The caller holds l.mu
// (for reading at least), so no add can slip between its look at the ring
// and this call.
func (l *Log) waitChan() <-chan struct{} {
	l.wakeMu.Lock()
	defer l.wakeMu.Unlock()
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	return l.wake
}

// at returns the i-th retained event, 0 being the oldest. l.mu is held.
func (l *Log) at(i int) *wire.Event {
	return &l.buf[(l.head+i)%len(l.buf)]
}

// firstAfter returns the index of the oldest retained event whose id is
// above id, or len(l.buf) when there is none. l.mu is held.
func (l *Log) firstAfter(id int64) int {
	n := len(l.buf)
	if n == 0 || l.at(n-1).ID <= id {
		return n
	}
	return sort.Search(n, func(i int) bool { return l.at(i).ID > id })
}

// oldestID returns the id a subscriber continues with after a resync: the
// oldest retained event's, or the next id when none is retained. l.mu is
// held.
func (l *Log) oldestID() int64 {
	if len(l.buf) == 0 {
		return l.lastID + 1
	}
	return l.at(0).ID
}

// LastID returns the id of the newest event added (Options.LastID before
// the first one).
func (l *Log) LastID() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.lastID
}

// Len returns the number of retained events.
func (l *Log) Len() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.buf)
}

// Query returns one page of the retained events that match f, newest first.
// Total counts every matching event. Pages start at 1; a page below 1 is
// read as 1 and a pageSize below 1 as DefaultPageSize. Bounds on pageSize
// are the HTTP layer's to enforce. Items is never nil.
func (l *Log) Query(f Filter, page, pageSize int) wire.Page[wire.Event] {
	if page < 1 {
		page = 1
	}
	if pageSize < 1 {
		pageSize = DefaultPageSize
	}
	skip := (page - 1) * pageSize
	if page > 1 && skip/(page-1) != pageSize { // overflow: past every event
		skip = int(^uint(0) >> 1)
	}
	out := wire.Page[wire.Event]{Page: page, PageSize: pageSize}
	l.mu.RLock()
	defer l.mu.RUnlock()
	out.Items = make([]wire.Event, 0, min(pageSize, len(l.buf)))
	// Events at or below AfterID cannot match; ids ascend, so start above them.
	lo := l.firstAfter(f.AfterID)
	for i := len(l.buf) - 1; i >= lo; i-- {
		ev := l.at(i)
		if !f.match(ev) {
			continue
		}
		if out.Total >= skip && len(out.Items) < pageSize {
			out.Items = append(out.Items, *ev)
		}
		out.Total++
	}
	return out
}
