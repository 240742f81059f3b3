package history

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Defaults: one hour at ten seconds.
const (
	DefaultStep = 10 * time.Second
	DefaultSize = 360
	// DefaultMaxSeries bounds the series kept: 5,000 series of 360 points
	// of three values are about 45 MB at most.
	DefaultMaxSeries = 5000
)

// Counters are one series' counter values by name, at one observation.
type Counters map[string]float64

// Point is one step of a series: the per-second rate of each counter
// between the previous observation and At.
type Point struct {
	At    time.Time
	Rates map[string]float64
}

// series is one key's ring of points and its last observation.
type series struct {
	points []Point // oldest first, at most size
	last   Counters
	lastAt time.Time
}

// Recorder keeps the rate history of many series. Its mutex guards
// every field below it.
type Recorder struct {
	size, maxSeries int

	mu     sync.Mutex
	series map[string]*series
}

// New returns a Recorder keeping size points per series and at most
// maxSeries series (zero or less: the defaults).
func New(size, maxSeries int) *Recorder {
	if size <= 0 {
		size = DefaultSize
	}
	if maxSeries <= 0 {
		maxSeries = DefaultMaxSeries
	}
	return &Recorder{size: size, maxSeries: maxSeries, series: map[string]*series{}}
}

// Observe records the counters of every series at at. A series observed
// before gets one point: per counter, its increase over the time since,
// per second; a counter that went down was reset (its node restarted) and
// counts 0. A series not in obs is dropped once its newest point is older
// than size observations' worth of span (it no longer exists). New series
// beyond maxSeries are not kept.
func (r *Recorder) Observe(at time.Time, obs map[string]Counters, span time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, c := range obs {
		s, ok := r.series[key]
		if !ok {
			if len(r.series) >= r.maxSeries {
				continue
			}
			s = &series{}
			r.series[key] = s
		}
		if s.last != nil {
			if dt := at.Sub(s.lastAt).Seconds(); dt > 0 {
				p := Point{At: at, Rates: make(map[string]float64, len(c))}
				for name, v := range c {
					prev, ok := s.last[name]
					switch {
					case !ok:
						continue
					case v >= prev:
						p.Rates[name] = (v - prev) / dt
					default:
						p.Rates[name] = 0
					}
				}
				if len(s.points) == r.size {
					s.points = slices.Delete(s.points, 0, 1)
				}
				s.points = append(s.points, p)
			}
		}
		s.last, s.lastAt = maps.Clone(c), at
	}
	for key, s := range r.series {
		if _, ok := obs[key]; !ok && at.Sub(s.lastAt) > span {
			delete(r.series, key)
		}
	}
}

// Points returns a copy of key's points, oldest first (none for a series
// not kept).
func (r *Recorder) Points(key string) []Point {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.series[key]
	if !ok {
		return []Point{}
	}
	out := make([]Point, len(s.points))
	for i, p := range s.points {
		out[i] = Point{At: p.At, Rates: maps.Clone(p.Rates)}
	}
	return out
}

// Len is the number of series kept.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.series)
}
