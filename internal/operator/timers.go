package operator

import "math"

// timers are the pending fire times of a window operator: a min-heap of
// distinct times, each with the keys to look at then. Windows of one
// size share their ends across keys, so there are few distinct times and
// registering a key is an append; OnWatermark with nothing due is a look
// at the heap's top.
type timers struct {
	times   []int64 // min-heap
	buckets map[int64]*bucket
	free    []*bucket
	last    *bucket // the bucket registered into last, often the next one
}

type bucket struct {
	at   int64
	keys []*winKey
}

func newTimers() timers {
	return timers{buckets: make(map[int64]*bucket)}
}

// add registers k to be looked at when the watermark reaches at.
func (t *timers) add(at int64, k *winKey) {
	b := t.last
	if b == nil || b.at != at {
		b = t.buckets[at]
		if b == nil {
			if n := len(t.free); n > 0 {
				b = t.free[n-1]
				t.free = t.free[:n-1]
			} else {
				b = &bucket{}
			}
			b.at = at
			t.buckets[at] = b
			t.push(at)
		}
		t.last = b
	}
	b.keys = append(b.keys, k)
}

// next is the earliest pending time; ok is false when none is pending.
func (t *timers) next() (int64, bool) {
	if len(t.times) == 0 {
		return math.MaxInt64, false
	}
	return t.times[0], true
}

// pop removes the earliest bucket; give it back with recycle.
func (t *timers) pop() *bucket {
	at := t.times[0]
	n := len(t.times) - 1
	t.times[0] = t.times[n]
	t.times = t.times[:n]
	t.down(0)
	b := t.buckets[at]
	delete(t.buckets, at)
	if t.last == b {
		t.last = nil
	}
	return b
}

func (t *timers) recycle(b *bucket) {
	clear(b.keys)
	b.keys = b.keys[:0]
	t.free = append(t.free, b)
}

func (t *timers) push(at int64) {
	t.times = append(t.times, at)
	i := len(t.times) - 1
	for i > 0 {
		p := (i - 1) / 2
		if t.times[p] <= t.times[i] {
			break
		}
		t.times[p], t.times[i] = t.times[i], t.times[p]
		i = p
	}
}

func (t *timers) down(i int) {
	n := len(t.times)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && t.times[r] < t.times[l] {
			m = r
		}
		if t.times[i] <= t.times[m] {
			return
		}
		t.times[i], t.times[m] = t.times[m], t.times[i]
		i = m
	}
}
