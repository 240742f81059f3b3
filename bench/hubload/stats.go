package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// recorder collects request latencies and failures by kind (register,
// heartbeat, report, poll, ...). Latencies are kept only while measuring is
// set (the steady-state window); failures are counted always, and
// separately inside the window. mu guards series.
type recorder struct {
	measuring atomic.Bool
	always    map[string]bool // kinds whose latencies are kept outside the window too
	mu        sync.Mutex
	series    map[string]*series
}

type series struct {
	lat        []time.Duration // inside the window
	calls      int             // inside the window, failed ones included
	errs       map[string]int  // class -> count, whole run
	windowErrs int
	example    map[string]string // class -> one message, for diagnosis
}

// newRecorder returns a recorder that keeps the latencies of the always
// kinds (registration, which happens before the window) whenever they occur.
func newRecorder(always ...string) *recorder {
	r := &recorder{series: map[string]*series{}, always: map[string]bool{}}
	for _, k := range always {
		r.always[k] = true
	}
	return r
}

func (r *recorder) seriesLocked(kind string) *series {
	s := r.series[kind]
	if s == nil {
		s = &series{errs: map[string]int{}, example: map[string]string{}}
		r.series[kind] = s
	}
	return s
}

// ok records one successful call of kind that took d.
func (r *recorder) ok(kind string, d time.Duration) {
	if !r.measuring.Load() && !r.always[kind] {
		return
	}
	r.mu.Lock()
	s := r.seriesLocked(kind)
	s.lat = append(s.lat, d)
	s.calls++
	r.mu.Unlock()
}

// fail records one failed call of kind.
func (r *recorder) fail(kind string, err error) {
	class := classify(err)
	r.mu.Lock()
	s := r.seriesLocked(kind)
	s.errs[class]++
	if _, ok := s.example[class]; !ok {
		s.example[class] = err.Error()
	}
	if r.measuring.Load() || r.always[kind] {
		s.calls++
		s.windowErrs++
	}
	r.mu.Unlock()
}

// totalErrors is the number of failures of every kind in the whole run.
func (r *recorder) totalErrors() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.series {
		for _, c := range s.errs {
			n += c
		}
	}
	return n
}

// calls is the number of calls of kind recorded inside the window.
func (r *recorder) calls(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.series[kind]; s != nil {
		return s.calls
	}
	return 0
}

// print writes one line per kind: calls and failures in the window,
// latency percentiles, and the failures of the whole run by class.
func (r *recorder) print(kinds []string, withLatency map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range kinds {
		s := r.series[k]
		if s == nil {
			fmt.Printf("  %-10s no calls\n", k)
			continue
		}
		line := fmt.Sprintf("  %-10s calls %7d  errors %d", k, s.calls, s.windowErrs)
		if withLatency[k] {
			p := percentiles(s.lat)
			line += "  latency " + p.String()
		}
		fmt.Println(line)
		classes := make([]string, 0, len(s.errs))
		for c := range s.errs {
			classes = append(classes, c)
		}
		sort.Strings(classes)
		for _, c := range classes {
			fmt.Printf("  %-10s   whole run: %d x %s (e.g. %s)\n", "", s.errs[c], c, truncate(s.example[c], 160))
		}
	}
}

// dist summarises a latency sample.
type dist struct {
	N                        int
	P50, P90, P99, P999, Max time.Duration
}

func percentiles(d []time.Duration) dist {
	if len(d) == 0 {
		return dist{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) time.Duration {
		i := int(q*float64(len(s))+0.5) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return dist{N: len(s), P50: at(0.50), P90: at(0.90), P99: at(0.99), P999: at(0.999), Max: s[len(s)-1]}
}

func (d dist) String() string {
	if d.N == 0 {
		return "(no samples)"
	}
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (n=%d)",
		ms(d.P50), ms(d.P90), ms(d.P99), ms(d.P999), ms(d.Max), d.N)
}

// ms formats d in milliseconds with enough precision for sub-ms values.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// classify names the kind of a failure: "http <status> <code>" for an
// answer, or the transport condition.
func classify(err error) string {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return fmt.Sprintf("http %d %s", he.status, he.code)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, errTimeout):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "no local address (ephemeral ports)"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "too many open files"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	if strings.Contains(err.Error(), "EOF") {
		return "connection closed (EOF)"
	}
	return "transport"
}

var errTimeout = errors.New("timed out")

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
