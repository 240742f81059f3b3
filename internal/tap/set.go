package tap

import (
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/flowplane/flowplane/internal/message"
)

// Sample is the copy of one message (or job record) taken at a point.
type Sample struct {
	Point string
	At    time.Time
	// Payload is a copy of the message's bytes (a job record's value as
	// JSON when it was decoded).
	Payload []byte
	// Meta holds the message's metadata fields and, when set, its source,
	// key, partition, offset and event time under those names.
	Meta map[string]string
}

// Set is the taps of one stream or job. The zero value is ready and has
// none; a nil *Set is valid too and never samples. Safe for concurrent use.
type Set struct {
	n    atomic.Int32 // len(*taps): the one load Offer makes
	mu   sync.Mutex   // serializes Attach and detach
	taps atomic.Pointer[[]*Tap]
}

// Attach adds t at its point until detach is called (or the tap ends).
func (s *Set) Attach(t *Tap) (detach func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cur []*Tap
	if p := s.taps.Load(); p != nil {
		cur = *p
	}
	next := append(slices.Clip(cur), t)
	s.taps.Store(&next)
	s.n.Store(int32(len(next)))
	var once sync.Once
	return func() { once.Do(func() { s.detach(t) }) }
}

func (s *Set) detach(t *Tap) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.taps.Load()
	if p == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*p), func(x *Tap) bool { return x == t })
	s.taps.Store(&next)
	s.n.Store(int32(len(next)))
}

// Attached returns the number of taps attached.
func (s *Set) Attached() int {
	if s == nil {
		return 0
	}
	return int(s.n.Load())
}

// Offer offers the messages of b, as they are after point, to the taps
// attached there. It never blocks; without taps it is one atomic load.
// The caller must own b for the call (it may read the payloads).
func (s *Set) Offer(point string, b message.Batch) {
	if s == nil || s.n.Load() == 0 {
		return
	}
	s.offer(point, b.Messages, nil)
}

// OfferValues offers job records' values (a []byte payload or a decoded
// JSON value) as Offer does.
func (s *Set) OfferValues(point string, n int, value func(i int) any) {
	if s == nil || s.n.Load() == 0 {
		return
	}
	s.offer(point, nil, func(t *Tap) {
		for i := range n {
			if !t.take() {
				return
			}
			t.put(Sample{Point: point, Payload: valueBytes(value(i))})
		}
	})
}

func (s *Set) offer(point string, msgs []message.Message, each func(*Tap)) {
	p := s.taps.Load()
	if p == nil {
		return
	}
	for _, t := range *p {
		if t.point != point {
			continue
		}
		if each != nil {
			each(t)
			continue
		}
		for i := range msgs {
			if !t.take() {
				break
			}
			t.put(copyMessage(point, &msgs[i]))
		}
	}
}

func copyMessage(point string, m *message.Message) Sample {
	p, err := m.Payload()
	if err != nil {
		p = nil
	}
	smp := Sample{Point: point, Payload: slices.Clone(p)}
	md := m.Meta
	meta := make(map[string]string, len(md.Fields)+4)
	for k, v := range md.Fields {
		meta[k] = v
	}
	if md.Source != "" {
		meta["source"] = md.Source
	}
	if len(md.Key) > 0 {
		meta["key"] = string(md.Key)
	}
	if md.Offset != 0 || md.Partition != 0 {
		meta["partition"] = itoa(int64(md.Partition))
		meta["offset"] = itoa(md.Offset)
	}
	if !md.Timestamp.IsZero() {
		meta["event_time"] = md.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	if len(meta) > 0 {
		smp.Meta = meta
	}
	return smp
}

func valueBytes(v any) []byte {
	if b, ok := v.([]byte); ok {
		return slices.Clone(b)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// Tap is one attached sampler: a point, a token bucket and a bounded
// buffer its reader drains with C.
type Tap struct {
	point string
	now   func() time.Time
	ch    chan Sample

	mu  sync.Mutex // guards lim: several workers may offer at once
	lim *rate.Limiter

	sampled, dropped atomic.Uint64
}

// DefaultBuffer is the number of samples a tap holds for its reader.
const DefaultBuffer = 64

// New returns a tap at point taking at most perSecond messages a second
// (bursts up to one second's worth), holding up to buffer samples
// (DefaultBuffer when below 1). now is its clock; nil means time.Now.
func New(point string, perSecond, buffer int, now func() time.Time) *Tap {
	if buffer < 1 {
		buffer = DefaultBuffer
	}
	if now == nil {
		now = time.Now
	}
	return &Tap{point: point, now: now, ch: make(chan Sample, buffer),
		lim: rate.NewLimiter(rate.Limit(perSecond), max(perSecond, 1))}
}

// Point returns where the tap samples.
func (t *Tap) Point() string { return t.point }

// C returns the channel of samples.
func (t *Tap) C() <-chan Sample { return t.ch }

// Sampled returns how many samples were handed to the buffer.
func (t *Tap) Sampled() uint64 { return t.sampled.Load() }

// Dropped returns how many samples were dropped because the buffer was
// full.
func (t *Tap) Dropped() uint64 { return t.dropped.Load() }

func (t *Tap) take() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lim.AllowN(t.now(), 1)
}

func (t *Tap) put(s Sample) {
	s.At = t.now()
	select {
	case t.ch <- s:
		t.sampled.Add(1)
	default:
		t.dropped.Add(1)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
