package engine

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
)

// member is what a stream and a job share: where the configuration has
// it, and its run. Engine.mu guards it.
type member struct {
	path    string             // configuration path, e.g. streams[2]
	stopped bool               // stopped on request (not ended by itself)
	cancel  context.CancelFunc // set while it runs and nobody asked it to stop
	done    chan struct{}      // closed when its run returned, or at once when it never ran
	err     error              // the build error, or the run's result once done
	// remote is set for the Hub's work (a configuration applied with
	// ApplyOptions.Remote, a Hub job): its components reach files and the
	// network through Options.Remote.
	remote bool
}

func (m *member) base() *member { return m }

// hold leaves the member configured but stopped, as if stopped on
// request, until it is started.
func (m *member) hold() { m.stopped, m.done = true, closedChan() }

// endedByItself reports whether its run ended (completed or failed)
// without anybody asking it to stop.
func (m *member) endedByItself() bool {
	select {
	case <-m.done:
		return !m.stopped
	default:
		return false
	}
}

// ended reports whether m's run returned, or it never ran.
func (e *Engine) ended(m *member) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// configured is a stream's or a job's instance, of configuration C.
type configured[C any] interface {
	base() *member
	config() C
}

// kind is how Apply makes one kind of member (streams, configured jobs)
// match the configuration.
type kind[C any, M configured[C]] struct {
	name  string       // "streams" or "jobs": configuration paths are name[i]
	byID  map[string]M // every member by id (jobs: the Hub's too)
	order *[]string    // the configured ids in configuration order
	id    func(C) string
	// create makes the member of a configuration new to the engine.
	create func(conf C, path string) M
	// stop stops a member and waits for it (bounded by ctx); start builds
	// and launches one. Both are called with e.opMu held.
	stop  func(ctx context.Context, m M)
	start func(m M) error
	// forget drops the metrics of a member the configuration removed.
	forget func(id string)
	// refuse, when set, is called with e.mu held for each configured id:
	// an error leaves that member out (not configured, not started) and
	// is returned with the others.
	refuse func(id, path string) error
	// remote is whether the configuration applied is the Hub's: members
	// it creates are remote, and a member kept from a configuration of the
	// other origin is started again under this one's sandbox.
	remote bool
}

// apply makes the members match confs: unchanged ones keep running,
// changed ones stop and start again, removed ones stop and new ones start,
// save those named in held: they are configured but stay stopped until
// started. It returns the problems refusing or starting members. The
// caller holds e.opMu.
func (k kind[C, M]) apply(ctx context.Context, e *Engine, confs []C, held []string) []error {
	want := map[string]int{}
	for i, c := range confs {
		want[k.id(c)] = i
	}
	e.mu.Lock()
	old := slices.Clone(*k.order)
	e.mu.Unlock()
	for _, id := range old {
		e.mu.Lock()
		m := k.byID[id]
		e.mu.Unlock()
		if i, keep := want[id]; keep && m.base().remote == k.remote && reflect.DeepEqual(m.config(), confs[i]) {
			continue
		}
		k.stop(ctx, m)
		// The map and the order change together: readers walk the order
		// and must find every id in the map.
		e.mu.Lock()
		delete(k.byID, id)
		*k.order = slices.DeleteFunc(*k.order, func(x string) bool { return x == id })
		e.mu.Unlock()
		if _, kept := want[id]; !kept {
			k.forget(id)
		}
	}
	var fresh []M
	var errs []error
	e.mu.Lock()
	*k.order = (*k.order)[:0]
	for i, c := range confs {
		id, path := k.id(c), fmt.Sprintf("%s[%d]", k.name, i)
		if k.refuse != nil {
			if err := k.refuse(id, path); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		*k.order = append(*k.order, id)
		if m, kept := k.byID[id]; kept {
			m.base().path = path
			continue
		}
		m := k.create(c, path)
		m.base().remote = k.remote
		k.byID[id] = m
		fresh = append(fresh, m)
	}
	e.mu.Unlock()
	for _, m := range fresh {
		if slices.Contains(held, k.id(m.config())) {
			e.mu.Lock()
			m.base().hold()
			e.mu.Unlock()
			continue
		}
		if err := k.start(m); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// watchers fan a coalesced signal out to each of their subscribers: each
// has its own buffered(1) channel that notify fills without blocking.
type watchers struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{} // guarded by mu
}

// watch subscribes; the returned function unsubscribes.
func (w *watchers) watch() (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[chan struct{}]struct{}{}
	}
	w.subs[c] = struct{}{}
	w.mu.Unlock()
	return c, func() {
		w.mu.Lock()
		delete(w.subs, c)
		w.mu.Unlock()
	}
}

// notify signals every subscriber; it never blocks.
func (w *watchers) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}
