package httpapi

import (
	"container/list"
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// Errors an IdempotencyStore returns from Begin.
var (
	// ErrIdempotencyKeyReused: the key was first used for another request.
	ErrIdempotencyKeyReused = errors.New("idempotency key reused with a different request")
	// ErrIdempotencyKeyInUse: the first request with the key is still running.
	ErrIdempotencyKeyInUse = errors.New("idempotency key in use by a request in flight")
)

// IdempotencyKey names one key of one principal on one resource: keys of
// different principals never meet, and the same key sent to another
// resource is another request.
type IdempotencyKey struct {
	Principal string
	// Resource is the method and the escaped path ("POST /streams/s1/start").
	Resource string
	Key      string
}

// StoredResponse is the first response to a keyed request, replayed to its
// retries. Header holds only Content-Type, Location and ETag.
type StoredResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// IdempotencyStore keeps Idempotency-Key outcomes. The fingerprint
// identifies the request within its key (SHA-256 of the query and the
// body); the store compares it verbatim. Implementations must be safe for concurrent use; a
// durable store (the Hub's) implements the same two calls.
type IdempotencyStore interface {
	// Begin claims key for a request with fingerprint. It returns (nil, nil)
	// when the caller now owns the key and must call Finish; the stored
	// response when a request with the same fingerprint already finished;
	// ErrIdempotencyKeyReused when the key belongs to another fingerprint;
	// ErrIdempotencyKeyInUse when the same request is still in flight.
	Begin(ctx context.Context, key IdempotencyKey, fingerprint string) (*StoredResponse, error)
	// Finish stores resp for key, or releases the claim when resp is nil (a
	// 5xx or a panic: the client may retry).
	Finish(ctx context.Context, key IdempotencyKey, fingerprint string, resp *StoredResponse) error
}

// MemoryStoreOptions bound a MemoryStore. Zero values take the defaults.
type MemoryStoreOptions struct {
	TTL        time.Duration    // how long a key is kept; default 24 h
	MaxEntries int              // oldest keys are dropped beyond this; default 10000
	Now        func() time.Time // clock; default time.Now
}

// MemoryStore is a bounded in-memory IdempotencyStore: keys live TTL from
// their first use, and at most MaxEntries are kept (oldest dropped first).
type MemoryStore struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex // guards entries and order
	entries map[IdempotencyKey]*list.Element
	order   *list.List // of *memEntry, oldest first
}

type memEntry struct {
	key         IdempotencyKey
	fingerprint string
	created     time.Time
	resp        *StoredResponse // nil while in flight
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(o MemoryStoreOptions) *MemoryStore {
	if o.TTL <= 0 {
		o.TTL = 24 * time.Hour
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 10000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &MemoryStore{
		ttl:     o.TTL,
		max:     o.MaxEntries,
		now:     o.Now,
		entries: make(map[IdempotencyKey]*list.Element),
		order:   list.New(),
	}
}

var _ IdempotencyStore = (*MemoryStore)(nil)

// Begin implements IdempotencyStore.
func (s *MemoryStore) Begin(_ context.Context, key IdempotencyKey, fingerprint string) (*StoredResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.expire(now)
	if el, ok := s.entries[key]; ok {
		e := el.Value.(*memEntry)
		switch {
		case e.fingerprint != fingerprint:
			return nil, ErrIdempotencyKeyReused
		case e.resp == nil:
			return nil, ErrIdempotencyKeyInUse
		}
		return e.resp.clone(), nil
	}
	for s.order.Len() >= s.max {
		s.remove(s.order.Front())
	}
	s.entries[key] = s.order.PushBack(&memEntry{key: key, fingerprint: fingerprint, created: now})
	return nil, nil
}

// Finish implements IdempotencyStore. A claim that expired or was evicted
// meanwhile is not recreated.
func (s *MemoryStore) Finish(_ context.Context, key IdempotencyKey, fingerprint string, resp *StoredResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.entries[key]
	if !ok {
		return nil
	}
	e := el.Value.(*memEntry)
	if e.fingerprint != fingerprint || e.resp != nil {
		return nil
	}
	if resp == nil {
		s.remove(el)
		return nil
	}
	e.resp = resp.clone()
	return nil
}

// Len returns the number of keys held, in flight or finished.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}

// expire drops keys older than the TTL; entries are in creation order.
func (s *MemoryStore) expire(now time.Time) {
	for el := s.order.Front(); el != nil; el = s.order.Front() {
		if now.Sub(el.Value.(*memEntry).created) < s.ttl {
			return
		}
		s.remove(el)
	}
}

func (s *MemoryStore) remove(el *list.Element) {
	delete(s.entries, el.Value.(*memEntry).key)
	s.order.Remove(el)
}

func (r *StoredResponse) clone() *StoredResponse {
	return &StoredResponse{Status: r.Status, Header: r.Header.Clone(), Body: append([]byte(nil), r.Body...)}
}
