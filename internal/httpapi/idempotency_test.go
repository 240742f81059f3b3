package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/httpapi"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// idemServer serves a counting handler that creates the resource named by
// its JSON body, and returns the base URL, the call counter and the clock.
func idemServer(t *testing.T, fail *atomic.Bool) (string, *atomic.Int64, *fakeClock) {
	t.Helper()
	clock := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	var calls atomic.Int64
	create := func(w http.ResponseWriter, r *http.Request) error {
		n := calls.Add(1)
		var body struct {
			Name string `json:"name"`
		}
		if err := httpapi.DecodeJSON(r, &body, 0); err != nil {
			return err
		}
		if fail != nil && fail.Load() {
			return errors.New("store down")
		}
		if body.Name == "conflict" {
			return httpapi.Conflict("conflict", "exists")
		}
		w.Header().Set("Location", "/things/"+body.Name)
		w.Header().Set("ETag", httpapi.ETag(n))
		w.Header().Set("X-Other", "not replayed")
		return httpapi.WriteJSON(w, http.StatusCreated, map[string]any{"name": body.Name, "call": n})
	}
	auth := func(r *http.Request) (string, error) {
		if tok, ok := httpapi.BearerCredential(r); ok {
			return "user:" + tok, nil
		}
		return httpapi.PrincipalAnonymous, nil
	}
	url := serve(t, []httpapi.Route{
		{Method: "POST", Pattern: "/things/{group}", Handler: create},
		{Method: "PUT", Pattern: "/things/{group}", Handler: create},
	}, httpapi.Options{
		Logger:      discard(),
		Auth:        auth,
		Idempotency: httpapi.NewMemoryStore(httpapi.MemoryStoreOptions{Now: clock.Now}),
	})
	return url, &calls, clock
}

func post(t *testing.T, method, url, body string, headers ...string) response {
	t.Helper()
	return do(t, method, url, str(body), append([]string{"Content-Type", "application/json"}, headers...)...)
}

func TestIdempotencyReplay(t *testing.T) {
	url, calls, _ := idemServer(t, nil)
	first := post(t, "POST", url+"/things/g", `{"name":"a"}`, "Idempotency-Key", "k1")
	second := post(t, "POST", url+"/things/g", `{"name":"a"}`, "Idempotency-Key", "k1")
	if first.status != 201 || second.status != 201 {
		t.Fatalf("statuses %d %d: %s %s", first.status, second.status, first.body, second.body)
	}
	if calls.Load() != 1 {
		t.Errorf("handler ran %d times, want 1", calls.Load())
	}
	if string(first.body) != string(second.body) {
		t.Errorf("replayed body %s, want %s", second.body, first.body)
	}
	for _, h := range []string{"Location", "ETag", "Content-Type"} {
		if first.header.Get(h) == "" || first.header.Get(h) != second.header.Get(h) {
			t.Errorf("%s: first %q, replay %q", h, first.header.Get(h), second.header.Get(h))
		}
	}
	if first.header.Get("Idempotent-Replayed") != "" || second.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("Idempotent-Replayed: first %q, replay %q", first.header.Get("Idempotent-Replayed"), second.header.Get("Idempotent-Replayed"))
	}
	if second.header.Get("X-Other") != "" {
		t.Error("a header outside Content-Type, Location, ETag was replayed")
	}
	if first.header.Get("X-Correlation-ID") == second.header.Get("X-Correlation-ID") {
		t.Error("the replay reused the first request's X-Correlation-ID header")
	}
}

func TestIdempotencyScope(t *testing.T) {
	cases := []struct {
		name          string
		method, path  string
		body          string
		auth          string
		status        int
		code          string
		callsAfterTwo int64
	}{
		{"same request replays", "POST", "/things/g", `{"name":"a"}`, "", 201, "", 1},
		{"different body", "POST", "/things/g", `{"name":"b"}`, "", 409, "idempotency_key_reused", 1},
		{"different resource is a new request", "POST", "/things/h", `{"name":"a"}`, "", 201, "", 2},
		{"different method is a new request", "PUT", "/things/g", `{"name":"a"}`, "", 201, "", 2},
		{"different query", "POST", "/things/g?force=1", `{"name":"a"}`, "", 409, "idempotency_key_reused", 1},
		{"different principal is independent", "POST", "/things/g", `{"name":"a"}`, "other", 201, "", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, calls, _ := idemServer(t, nil)
			if r := post(t, "POST", url+"/things/g", `{"name":"a"}`, "Idempotency-Key", "k"); r.status != 201 {
				t.Fatalf("first: %d %s", r.status, r.body)
			}
			hs := []string{"Idempotency-Key", "k"}
			if tc.auth != "" {
				hs = append(hs, "Authorization", "Bearer "+tc.auth)
			}
			r := post(t, tc.method, url+tc.path, tc.body, hs...)
			if r.status != tc.status {
				t.Fatalf("second: %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.code != "" {
				if p := r.problem(t); p.Code != tc.code {
					t.Errorf("code %q, want %q", p.Code, tc.code)
				}
			}
			if calls.Load() != tc.callsAfterTwo {
				t.Errorf("handler ran %d times, want %d", calls.Load(), tc.callsAfterTwo)
			}
		})
	}
}

func TestIdempotencyStoresClientErrors(t *testing.T) {
	url, calls, _ := idemServer(t, nil)
	a := post(t, "POST", url+"/things/g", `{"name":"conflict"}`, "Idempotency-Key", "k")
	b := post(t, "POST", url+"/things/g", `{"name":"conflict"}`, "Idempotency-Key", "k")
	if a.status != 409 || b.status != 409 || calls.Load() != 1 || b.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("got %d, %d, %d calls, replayed %q", a.status, b.status, calls.Load(), b.header.Get("Idempotent-Replayed"))
	}
	if string(a.body) != string(b.body) {
		t.Errorf("replayed problem %s, want %s", b.body, a.body)
	}
}

func TestIdempotency5xxNotStored(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	url, calls, _ := idemServer(t, &fail)
	if r := post(t, "POST", url+"/things/g", `{"name":"a"}`, "Idempotency-Key", "k"); r.status != 500 {
		t.Fatalf("first: %d", r.status)
	}
	fail.Store(false)
	r := post(t, "POST", url+"/things/g", `{"name":"a"}`, "Idempotency-Key", "k")
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "" || calls.Load() != 2 {
		t.Fatalf("retry: %d replayed=%q calls=%d", r.status, r.header.Get("Idempotent-Replayed"), calls.Load())
	}
}

func TestIdempotencyExpiry(t *testing.T) {
	url, calls, clock := idemServer(t, nil)
	post(t, "POST", url+"/things/g", `{"name":"a"}`, "Idempotency-Key", "k")
	clock.Advance(24*time.Hour - time.Second)
	if r := post(t, "POST", url+"/things/g", `{"name":"a"}`, "Idempotency-Key", "k"); r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("before expiry: not replayed (%d)", r.status)
	}
	clock.Advance(time.Second)
	r := post(t, "POST", url+"/things/g", `{"name":"b"}`, "Idempotency-Key", "k")
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "" || calls.Load() != 2 {
		t.Fatalf("after expiry: %d replayed=%q calls=%d", r.status, r.header.Get("Idempotent-Replayed"), calls.Load())
	}
}

func TestIdempotencyKeyHeader(t *testing.T) {
	url, calls, _ := idemServer(t, nil)
	cases := []struct {
		name   string
		keys   []string
		status int
	}{
		{"255 chars", []string{strings.Repeat("k", 255)}, 201},
		{"256 chars", []string{strings.Repeat("k", 256)}, 400},
		{"empty", []string{""}, 400},
		{"non-ASCII", []string{"cl\u00e9"}, 400},
		{"two keys", []string{"a", "b"}, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var hs []string
			for _, k := range tc.keys {
				hs = append(hs, "Idempotency-Key", k)
			}
			r := post(t, "POST", url+"/things/"+tc.name[:1], `{"name":"a"}`, hs...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.status == 400 && r.problem(t).Code != "invalid_header" {
				t.Errorf("code %q", r.problem(t).Code)
			}
		})
	}
	t.Run("no key runs every time", func(t *testing.T) {
		before := calls.Load()
		post(t, "POST", url+"/things/n", `{"name":"a"}`)
		post(t, "POST", url+"/things/n", `{"name":"a"}`)
		if calls.Load()-before != 2 {
			t.Errorf("handler ran %d times, want 2", calls.Load()-before)
		}
	})
}

func TestIdempotencyInFlight(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int64
	url := serve(t, []httpapi.Route{{Method: "POST", Pattern: "/slow", Handler: func(w http.ResponseWriter, r *http.Request) error {
		calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		close(entered)
		<-release
		return httpapi.WriteJSON(w, 202, map[string]string{"echo": string(b)})
	}}}, httpapi.Options{})

	done := make(chan response, 1)
	go func() {
		req, _ := http.NewRequest("POST", url+"/slow", str(`{"x":1}`))
		req.Header.Set("Idempotency-Key", "k")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- response{}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- response{status: resp.StatusCode, header: resp.Header, body: b}
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("first request never reached the handler")
	}
	same := do(t, "POST", url+"/slow", str(`{"x":1}`), "Idempotency-Key", "k")
	other := do(t, "POST", url+"/slow", str(`{"x":2}`), "Idempotency-Key", "k")
	close(release)
	first := <-done

	if same.status != 409 || same.problem(t).Code != "idempotency_key_in_use" {
		t.Errorf("same request in flight: %d %s", same.status, same.body)
	}
	if other.status != 409 || other.problem(t).Code != "idempotency_key_reused" {
		t.Errorf("other body in flight: %d %s", other.status, other.body)
	}
	if first.status != 202 || strings.TrimSpace(string(first.body)) != `{"echo":"{\"x\":1}"}` {
		t.Errorf("first: %d %s (the handler must still read the hashed body)", first.status, first.body)
	}
	after := do(t, "POST", url+"/slow", str(`{"x":1}`), "Idempotency-Key", "k")
	if after.status != 202 || after.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 1 {
		t.Errorf("after: %d replayed=%q calls=%d", after.status, after.header.Get("Idempotent-Replayed"), calls.Load())
	}
}

func TestIdempotencyPanicReleasesKey(t *testing.T) {
	var calls atomic.Int64
	url := serve(t, []httpapi.Route{{Method: "DELETE", Pattern: "/x", Handler: func(w http.ResponseWriter, r *http.Request) error {
		if calls.Add(1) == 1 {
			panic("first call fails")
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}}}, httpapi.Options{Logger: discard()})
	if r := do(t, "DELETE", url+"/x", nil, "Idempotency-Key", "k"); r.status != 500 {
		t.Fatalf("first: %d", r.status)
	}
	if r := do(t, "DELETE", url+"/x", nil, "Idempotency-Key", "k"); r.status != 204 || calls.Load() != 2 {
		t.Fatalf("retry: %d, calls %d", r.status, calls.Load())
	}
	if r := do(t, "DELETE", url+"/x", nil, "Idempotency-Key", "k"); r.status != 204 || r.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 2 {
		t.Fatalf("replay: %d, calls %d", r.status, calls.Load())
	}
}

func TestIdempotencyBodyTooLarge(t *testing.T) {
	var calls atomic.Int64
	url := serve(t, []httpapi.Route{{Method: "POST", Pattern: "/x", Handler: func(w http.ResponseWriter, r *http.Request) error {
		calls.Add(1)
		return nil
	}}}, httpapi.Options{MaxBodyBytes: 8})
	r := do(t, "POST", url+"/x", io.MultiReader(str(`{"name":"too long"}`)), "Idempotency-Key", "k", "Content-Type", "application/json")
	if r.status != 413 || r.problem(t).Code != "body_too_large" || calls.Load() != 0 {
		t.Fatalf("got %d %s, calls %d", r.status, r.body, calls.Load())
	}
}

func TestMemoryStore(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Unix(0, 0)}
	s := httpapi.NewMemoryStore(httpapi.MemoryStoreOptions{TTL: time.Hour, MaxEntries: 3, Now: clock.Now})
	key := func(i int) httpapi.IdempotencyKey { return httpapi.IdempotencyKey{Principal: "p", Key: fmt.Sprint(i)} }
	resp := &httpapi.StoredResponse{Status: 201, Header: http.Header{"Etag": {`"generation-1"`}}, Body: []byte("{}")}

	t.Run("bounded: oldest dropped", func(t *testing.T) {
		for i := range 5 {
			if _, err := s.Begin(ctx, key(i), "fp"); err != nil {
				t.Fatal(err)
			}
			if err := s.Finish(ctx, key(i), "fp", resp); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Minute)
		}
		if s.Len() != 3 {
			t.Fatalf("Len %d, want 3", s.Len())
		}
		if got, err := s.Begin(ctx, key(0), "other"); got != nil || err != nil {
			t.Fatalf("evicted key 0 still known: %v %v", got, err)
		}
		_ = s.Finish(ctx, key(0), "other", nil)
		got, err := s.Begin(ctx, key(4), "fp")
		if err != nil || !cmp.Equal(got, resp) {
			t.Fatalf("key 4: %+v %v", got, err)
		}
	})
	t.Run("stored response is a copy", func(t *testing.T) {
		got, _ := s.Begin(ctx, key(4), "fp")
		got.Body[0] = 'X'
		got.Header.Set("Etag", "changed")
		again, _ := s.Begin(ctx, key(4), "fp")
		if !cmp.Equal(again, resp) {
			t.Fatalf("store shared its response: %+v", again)
		}
	})
	t.Run("expiry frees keys", func(t *testing.T) {
		clock.Advance(time.Hour)
		if got, err := s.Begin(ctx, key(4), "new"); got != nil || err != nil {
			t.Fatalf("expired key 4 still known: %v %v", got, err)
		}
		if s.Len() != 1 {
			t.Fatalf("Len %d, want 1", s.Len())
		}
	})
	t.Run("in flight and reused", func(t *testing.T) {
		if _, err := s.Begin(ctx, key(4), "new"); !errors.Is(err, httpapi.ErrIdempotencyKeyInUse) {
			t.Fatalf("err %v, want in use", err)
		}
		if _, err := s.Begin(ctx, key(4), "newer"); !errors.Is(err, httpapi.ErrIdempotencyKeyReused) {
			t.Fatalf("err %v, want reused", err)
		}
		if err := s.Finish(ctx, key(4), "newer", resp); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Begin(ctx, key(4), "new"); !errors.Is(err, httpapi.ErrIdempotencyKeyInUse) {
			t.Fatalf("a Finish with the wrong fingerprint completed the claim: %v", err)
		}
		_ = s.Finish(ctx, key(4), "new", nil)
		if got, err := s.Begin(ctx, key(4), "newer"); got != nil || err != nil {
			t.Fatalf("released key: %v %v", got, err)
		}
	})
	t.Run("principals do not share keys", func(t *testing.T) {
		other := httpapi.IdempotencyKey{Principal: "q", Key: "4"}
		if got, err := s.Begin(ctx, other, "x"); got != nil || err != nil {
			t.Fatalf("%v %v", got, err)
		}
	})
}
