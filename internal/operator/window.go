package operator

import (
	"context"
	"fmt"
	"math"

	"github.com/flowplane/flowplane/internal/job"
)

// Window kinds.
const (
	tumbling = iota
	sliding
	session
)

// Late-event policies.
const (
	policyDrop = iota
	policyRoute
	policyUpdate
)

// windowOp keeps, per key, the windows of event time a record falls into
// and emits one result per key and window when the watermark passes it.
//
// Firing and lateness follow the operator's time policy (L is
// allowed_lateness_ms). Policy update: a window fires when the watermark
// reaches end-1 and is kept until it reaches end-1+L; a record for a kept
// window that already fired updates it and it fires again at once; a
// record whose windows are all gone is late. Policies drop and route: a
// window fires once, when the watermark reaches end-1+L, and is dropped; a
// record whose windows have all fired is late. Late records are counted
// (update, drop) or emitted unchanged with EmitLate (route).
type windowOp struct {
	keyed
	kind             int
	size, slide, gap int64
	policy           int
	lateness         int64

	keys   map[string]*winKey
	wm     int64 // the last watermark
	timers timers
	dirty  []*winKey // changed since the last snapshot (tracked only with a table)
	idle   []*winKey // emptied at the last firing round: removed at the next one if still empty
}

// win is one window of a key. timer is the time of its pending timer:
// when it is not above the watermark no timer is pending, and one is
// registered at its next due time.
type win struct {
	start, end int64
	timer      int64
	fired      bool // update policy: fired at least once, kept for late records
}

// winBytes estimates a window's live bytes besides its accumulators.
const winBytes = 40

// winKey is one key's windows, sorted by start; window i's accumulators
// are accs[i*len(aggs):(i+1)*len(aggs)].
type winKey struct {
	canon string
	value any
	wins  []win
	accs  []acc

	dirty  bool // in windowOp.dirty
	stored bool // the table holds an entry for it
	idle   bool // in windowOp.idle
	gone   bool // removed from keys (stale timers skip it)
}

func newWindow(id string, c *job.WindowConfig) (*windowOp, error) {
	k, err := newKeyed(id, c.Key, c.Aggregations)
	if err != nil {
		return nil, err
	}
	o := &windowOp{keyed: k, keys: make(map[string]*winKey), wm: math.MinInt64, timers: newTimers()}
	w := c.Window
	switch w.Type {
	case "tumbling":
		o.kind, o.size, o.slide = tumbling, w.SizeMs, w.SizeMs
		if w.SizeMs <= 0 {
			return nil, fmt.Errorf("config.window.size_ms: must be positive for a tumbling window")
		}
	case "sliding":
		o.kind, o.size, o.slide = sliding, w.SizeMs, w.SlideMs
		if w.SizeMs <= 0 {
			return nil, fmt.Errorf("config.window.size_ms: must be positive for a sliding window")
		}
		if w.SlideMs <= 0 {
			return nil, fmt.Errorf("config.window.slide_ms: must be positive for a sliding window")
		}
	case "session":
		o.kind, o.gap = session, w.GapMs
		if w.GapMs <= 0 {
			return nil, fmt.Errorf("config.window.gap_ms: must be positive for a session window")
		}
	default:
		return nil, fmt.Errorf("config.window.type: %q is not one of tumbling, sliding, session", w.Type)
	}
	return o, nil
}

func (o *windowOp) Open(_ context.Context, oc *Context) error {
	if err := o.open(oc, "windows"); err != nil {
		return err
	}
	o.policy, o.lateness = policyDrop, 0
	if p := oc.Operator; p != nil && p.Time != nil {
		o.lateness = max(p.Time.AllowedLatenessMs, 0)
		switch p.Time.LatePolicy {
		case "", "drop":
		case "route":
			o.policy = policyRoute
		case "update":
			o.policy = policyUpdate
		default:
			return fmt.Errorf("operator %s: late_event_policy %q is not one of drop, route, update", o.id, p.Time.LatePolicy)
		}
	}
	na := len(o.aggs)
	return o.scan(func(canon string, b []byte) error {
		k := &winKey{canon: canon, stored: true}
		d := decoder{b: b}
		d.version()
		k.value = d.json()
		if n := d.uvarint(); d.err == nil && n != uint64(na) {
			return fmt.Errorf("operator %s: restore: state holds %d aggregations, the operator has %d", o.id, n, na)
		}
		nw := d.uvarint()
		if d.err == nil && nw > uint64(len(d.b)) {
			d.fail()
		}
		for range nw {
			if d.err != nil {
				break
			}
			w := win{start: d.varint(), end: d.varint(), fired: d.byte() == 1, timer: math.MinInt64}
			k.wins = append(k.wins, w)
			k.accs = append(k.accs, make([]acc, na)...)
			d.accs(k.accs[len(k.accs)-na:])
		}
		if err := d.end(); err != nil {
			return fmt.Errorf("operator %s: restore key %q: %w", o.id, canon, err)
		}
		if err := o.grow(keyBytes(canon) + int64(len(k.wins))*o.winBytes()); err != nil {
			return err
		}
		o.keys[canon] = k
		for i := range k.wins {
			o.schedule(k, i)
		}
		return nil
	})
}

func (o *windowOp) winBytes() int64 { return winBytes + int64(len(o.aggs))*accBytes }

// fireAt is when a window ending at end fires (first).
func (o *windowOp) fireAt(end int64) int64 {
	if o.policy == policyUpdate {
		return end - 1
	}
	return satAdd(end-1, o.lateness)
}

// purgeAt is when a window ending at end is dropped.
func (o *windowOp) purgeAt(end int64) int64 { return satAdd(end-1, o.lateness) }

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// floorTo is t rounded down to a multiple of n (n > 0), also for t < 0.
func floorTo(t, n int64) int64 {
	m := t % n
	if m < 0 {
		m += n
	}
	return t - m
}

func (o *windowOp) Process(_ context.Context, in []Record, out Collector) error {
	defer o.release()
	late := 0
	for i := range in {
		r := &in[i]
		if r.Time == NoTime {
			return fmt.Errorf("operator %s: a record without a time cannot be windowed", o.id)
		}
		var (
			isLate bool
			err    error
		)
		switch o.kind {
		case tumbling:
			isLate, err = o.tumble(r, out)
		case sliding:
			isLate, err = o.hop(r, out)
		default:
			isLate, err = o.sessionize(r, out)
		}
		if err != nil {
			return err
		}
		if isLate {
			if o.policy == policyRoute {
				out.EmitLate(*r)
			} else {
				late++
			}
		}
	}
	if late > 0 && o.oc != nil && o.oc.LateDropped != nil {
		o.oc.LateDropped(late)
	}
	return nil
}

// tumble adds r to its tumbling window; isLate when that is gone.
func (o *windowOp) tumble(r *Record, out Collector) (isLate bool, err error) {
	start := floorTo(r.Time, o.size)
	end := start + o.size
	if o.wm >= o.purgeAt(end) {
		return true, nil
	}
	k, err := o.keyFor(r)
	if err != nil {
		return false, err
	}
	i, err := o.window(k, start, end)
	if err != nil {
		return false, err
	}
	return false, o.accumulate(k, i, r, out)
}

// hop adds r to each of its sliding windows still kept; isLate when it
// belongs to some window but all of them are gone.
func (o *windowOp) hop(r *Record, out Collector) (isLate bool, err error) {
	var k *winKey
	fits, kept := 0, 0
	for start := floorTo(r.Time, o.slide); start > r.Time-o.size; start -= o.slide {
		end := start + o.size
		fits++
		if o.wm >= o.purgeAt(end) {
			continue
		}
		kept++
		if k == nil {
			if k, err = o.keyFor(r); err != nil {
				return false, err
			}
		}
		i, err := o.window(k, start, end)
		if err != nil {
			return false, err
		}
		if err := o.accumulate(k, i, r, out); err != nil {
			return false, err
		}
	}
	return fits > 0 && kept == 0, nil
}

// sessionize adds r to its key's session: [t, t+gap) merged with every
// session it overlaps. It is late when it overlaps none and its own
// window would already be gone.
func (o *windowOp) sessionize(r *Record, out Collector) (isLate bool, err error) {
	start, end := r.Time, satAdd(r.Time, o.gap)
	canon, value, err := o.keyOf(r)
	if err != nil {
		return false, err
	}
	k := o.keys[string(canon)]
	first, last := -1, -1
	if k != nil {
		for i := range k.wins {
			w := &k.wins[i]
			if w.start < end && start < w.end {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
	}
	if first < 0 {
		if o.wm >= o.purgeAt(end) {
			return true, nil
		}
		if k == nil {
			if k, err = o.newKey(canon, value); err != nil {
				return false, err
			}
		}
		i, err := o.window(k, start, end)
		if err != nil {
			return false, err
		}
		return false, o.accumulate(k, i, r, out)
	}
	na := len(o.aggs)
	w := &k.wins[first]
	w.start = min(w.start, start)
	w.end = max(k.wins[last].end, end)
	w.fired = false // fires again when due: at once if it is already
	for j := first + 1; j <= last; j++ {
		mergeAccs(o.aggs, k.accs[first*na:(first+1)*na], k.accs[j*na:(j+1)*na])
	}
	for j := last; j > first; j-- {
		o.remove(k, j)
	}
	return false, o.accumulate(k, first, r, out)
}

// keyFor returns r's key entry, making it.
func (o *windowOp) keyFor(r *Record) (*winKey, error) {
	canon, value, err := o.keyOf(r)
	if err != nil {
		return nil, err
	}
	if k := o.keys[string(canon)]; k != nil {
		return k, nil
	}
	return o.newKey(canon, value)
}

func (o *windowOp) newKey(canon []byte, value any) (*winKey, error) {
	c := string(canon)
	if err := o.grow(keyBytes(c)); err != nil {
		return nil, err
	}
	k := &winKey{canon: c, value: value}
	o.keys[c] = k
	return k, nil
}

// window returns the index of k's window [start, end), making it.
func (o *windowOp) window(k *winKey, start, end int64) (int, error) {
	i := len(k.wins)
	for i > 0 && k.wins[i-1].start >= start {
		if k.wins[i-1].start == start {
			return i - 1, nil
		}
		i--
	}
	if err := o.grow(o.winBytes()); err != nil {
		return 0, err
	}
	na := len(o.aggs)
	k.wins = append(k.wins, win{})
	copy(k.wins[i+1:], k.wins[i:])
	k.wins[i] = win{start: start, end: end, timer: math.MinInt64}
	for range na {
		k.accs = append(k.accs, acc{})
	}
	copy(k.accs[(i+1)*na:], k.accs[i*na:])
	clear(k.accs[i*na : (i+1)*na])
	k.idle = false
	return i, nil
}

// remove drops k's window i.
func (o *windowOp) remove(k *winKey, i int) {
	na := len(o.aggs)
	k.wins = append(k.wins[:i], k.wins[i+1:]...)
	copy(k.accs[i*na:], k.accs[(i+1)*na:])
	clear(k.accs[len(k.accs)-na:])
	k.accs = k.accs[:len(k.accs)-na]
	o.shrink(o.winBytes())
}

// accumulate adds r to k's window i; under policy update a window already
// due fires again at once with the corrected result.
func (o *windowOp) accumulate(k *winKey, i int, r *Record, out Collector) error {
	na := len(o.aggs)
	if err := add(o.id, o.aggs, k.accs[i*na:(i+1)*na], r); err != nil {
		return err
	}
	o.touch(k)
	if o.policy == policyUpdate && o.wm >= o.fireAt(k.wins[i].end) {
		o.emit(k, i, out)
		k.wins[i].fired = true
	}
	o.schedule(k, i)
	return nil
}

// schedule registers a timer for k's window i at its next due time unless
// one is pending no later than that (an earlier one, left by a session
// that grew, finds the window not due and schedules it again).
func (o *windowOp) schedule(k *winKey, i int) {
	w := &k.wins[i]
	due := o.purgeAt(w.end)
	if !w.fired {
		due = o.fireAt(w.end)
	}
	if w.timer > o.wm && w.timer <= due {
		return
	}
	w.timer = due
	o.timers.add(due, k)
}

func (o *windowOp) touch(k *winKey) {
	if o.table != nil && !k.dirty {
		k.dirty = true
		o.dirty = append(o.dirty, k)
	}
}

// emit sends the result of k's window i.
func (o *windowOp) emit(k *winKey, i int, out Collector) {
	na := len(o.aggs)
	w := &k.wins[i]
	m := make(map[string]any, 3+na)
	m["key"] = k.value
	m["window_start"] = float64(w.start)
	m["window_end"] = float64(w.end)
	results(o.aggs, k.accs[i*na:(i+1)*na], m)
	out.Emit(Record{Value: m, Time: w.end - 1})
}

// OnWatermark fires and drops the windows due at wm, in time order.
func (o *windowOp) OnWatermark(_ context.Context, wm int64, out Collector) error {
	if wm <= o.wm {
		return nil
	}
	o.wm = wm
	if at, ok := o.timers.next(); !ok || at > wm {
		return nil
	}
	o.removeIdle()
	for {
		at, ok := o.timers.next()
		if !ok || at > wm {
			break
		}
		b := o.timers.pop()
		for _, k := range b.keys {
			if !k.gone {
				o.fire(k, b.at, out)
			}
		}
		o.timers.recycle(b)
	}
	return nil
}

// fire handles k's windows due at t: fires, drops, or reschedules them.
func (o *windowOp) fire(k *winKey, t int64, out Collector) {
	for i := 0; i < len(k.wins); {
		w := &k.wins[i]
		if !w.fired && o.fireAt(w.end) <= t {
			o.emit(k, i, out)
			w.fired = true
			o.touch(k)
		}
		if o.purgeAt(w.end) <= t {
			o.remove(k, i)
			o.touch(k)
			continue
		}
		if w.timer <= t {
			w.timer = math.MinInt64
			o.schedule(k, i)
		}
		i++
	}
	if len(k.wins) == 0 && !k.idle {
		k.idle = true
		o.idle = append(o.idle, k)
	}
}

// removeIdle removes the keys emptied at the last firing round that got
// no window since: a key seen in every window stays, its entry reused.
func (o *windowOp) removeIdle() {
	for _, k := range o.idle {
		if k.idle && len(k.wins) == 0 && !k.gone {
			delete(o.keys, k.canon)
			k.gone = true
			o.shrink(keyBytes(k.canon))
			o.touch(k)
		}
		k.idle = false
	}
	clear(o.idle)
	o.idle = o.idle[:0]
}

func (o *windowOp) Snapshot(context.Context, int64) error {
	var (
		buf []byte
		err error
	)
	for _, k := range o.dirty {
		k.dirty = false
		if k.gone || len(k.wins) == 0 {
			if k.stored {
				if err := o.del(k.canon); err != nil {
					return err
				}
				k.stored = false
			}
			continue
		}
		buf = append(buf[:0], codecVersion)
		if buf, err = appendJSON(buf, k.value); err != nil {
			return fmt.Errorf("operator %s: snapshot key %q: %w", o.id, k.canon, err)
		}
		na := len(o.aggs)
		buf = appendUvarint(buf, uint64(na))
		buf = appendUvarint(buf, uint64(len(k.wins)))
		for i, w := range k.wins {
			buf = appendVarint(buf, w.start)
			buf = appendVarint(buf, w.end)
			fired := byte(0)
			if w.fired {
				fired = 1
			}
			buf = append(buf, fired)
			if buf, err = appendAccs(buf, k.accs[i*na:(i+1)*na]); err != nil {
				return fmt.Errorf("operator %s: snapshot key %q: %w", o.id, k.canon, err)
			}
		}
		if err := o.put(k.canon, buf); err != nil {
			return err
		}
		k.stored = true
	}
	clear(o.dirty)
	o.dirty = o.dirty[:0]
	return nil
}

func (o *windowOp) Commit(context.Context, int64) error { return nil }

func (o *windowOp) Close(context.Context) error {
	var n int64
	for _, k := range o.keys {
		n += keyBytes(k.canon) + int64(len(k.wins))*o.winBytes()
	}
	o.shrink(n)
	o.keys = nil
	return nil
}
