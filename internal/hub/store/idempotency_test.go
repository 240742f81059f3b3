package store

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/google/go-cmp/cmp"
)

func TestIdempotency(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	var now atomic.Int64
	now.Store(t0.UnixMilli())
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	d := s.Idempotency(clock)
	k := httpapi.IdempotencyKey{Principal: "op", Key: "k1"}
	if r, err := d.Begin(ctx, k, "fp1"); r != nil || err != nil {
		t.Fatalf("first Begin = %v, %v", r, err)
	}
	if _, err := d.Begin(ctx, k, "fp1"); !errors.Is(err, httpapi.ErrIdempotencyKeyInUse) {
		t.Errorf("in flight: %v", err)
	}
	if _, err := d.Begin(ctx, k, "fp2"); !errors.Is(err, httpapi.ErrIdempotencyKeyReused) {
		t.Errorf("other body: %v", err)
	}
	if r, err := d.Begin(ctx, httpapi.IdempotencyKey{Principal: "other", Key: "k1"}, "fp2"); r != nil || err != nil {
		t.Errorf("other principal = %v, %v", r, err)
	}
	resp := &httpapi.StoredResponse{Status: 202, Header: http.Header{"Etag": {`"generation-1"`}, "Location": {"/x"}, "X-Other": {"no"}}, Body: []byte(`{"a":1}`)}
	if err := d.Finish(ctx, k, "fp1", resp); err != nil {
		t.Fatal(err)
	}
	want := &httpapi.StoredResponse{Status: 202, Header: http.Header{"Etag": {`"generation-1"`}, "Location": {"/x"}}, Body: []byte(`{"a":1}`)}
	got, err := d.Begin(ctx, k, "fp1")
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("replay = %+v, %v; diff %s", got, err, cmp.Diff(want, got))
	}
	// Released claim (5xx): retry owns the key again.
	k2 := httpapi.IdempotencyKey{Principal: "op", Key: "k2"}
	_, _ = d.Begin(ctx, k2, "fp")
	if err := d.Finish(ctx, k2, "fp", nil); err != nil {
		t.Fatal(err)
	}
	if r, err := d.Begin(ctx, k2, "fp"); r != nil || err != nil {
		t.Errorf("after release = %v, %v", r, err)
	}
	// Durable across reopen; in-flight claims dropped.
	_ = s.Close()
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	d2 := s2.Idempotency(clock)
	if got, err := d2.Begin(ctx, k, "fp1"); err != nil || got == nil || got.Status != 202 {
		t.Errorf("after reopen = %+v, %v", got, err)
	}
	if r, err := d2.Begin(ctx, k2, "fp"); r != nil || err != nil {
		t.Errorf("stale in-flight claim survived reopen: %v, %v", r, err)
	}
	// Expired after 24 h: the key starts over, even with another body.
	now.Store(t0.Add(IdempotencyTTL).UnixMilli())
	if r, err := d2.Begin(ctx, k, "fp9"); r != nil || err != nil {
		t.Errorf("after TTL = %v, %v", r, err)
	}
}

// TestIdempotencyScopedByResource: the same key of one principal on another
// resource is another request.
func TestIdempotencyScopedByResource(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	d := s.Idempotency(func() time.Time { return t0 })
	a := httpapi.IdempotencyKey{Principal: "op", Resource: "PUT /a", Key: "k1"}
	b := httpapi.IdempotencyKey{Principal: "op", Resource: "PUT /b", Key: "k1"}
	if r, err := d.Begin(ctx, a, "fp1"); r != nil || err != nil {
		t.Fatalf("Begin a = %v, %v", r, err)
	}
	if err := d.Finish(ctx, a, "fp1", &httpapi.StoredResponse{Status: 202, Header: http.Header{}, Body: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if r, err := d.Begin(ctx, b, "fp1"); r != nil || err != nil {
		t.Fatalf("same key on another resource = %v, %v; want a new claim", r, err)
	}
	if _, err := d.Begin(ctx, a, "fp2"); !errors.Is(err, httpapi.ErrIdempotencyKeyReused) {
		t.Fatalf("same key and resource, other body: %v", err)
	}
	if r, err := d.Begin(ctx, a, "fp1"); err != nil || r == nil || string(r.Body) != "a" {
		t.Fatalf("replay = %+v, %v", r, err)
	}
}

// TestMigrateIdempotencyScope opens a database at schema version 2 holding
// idempotency rows, as the previous build left it: operator rows are kept
// (under no resource, so no request matches them until they expire), agent
// rows (a stored register answer holds a session token) are dropped, and
// keys are scoped by resource from then on.
func TestMigrateIdempotencyScope(t *testing.T) {
	ctx := context.Background()
	s := openFromVersion(t, 2,
		`INSERT INTO idempotency (principal, key, fingerprint, done, status, header, body, created_at)
			VALUES ('operator', 'k1', 'fp1', 1, 202, '{}', CAST('{"op":1}' AS BLOB), 1000)`,
		`INSERT INTO idempotency (principal, key, fingerprint, done, status, header, body, created_at)
			VALUES ('node', 'reg', 'fp', 1, 200, '{}', CAST('{"session_token":"secret-session"}' AS BLOB), 1000)`,
		`INSERT INTO idempotency (principal, key, fingerprint, done, status, header, body, created_at)
			VALUES ('node:n1', 'hb', 'fp', 1, 204, '{}', NULL, 1000)`,
	)
	if n := count(t, s, "SELECT COUNT(*) FROM idempotency WHERE principal = 'operator' AND resource = '' AND key = 'k1' AND CAST(body AS TEXT) = '{\"op\":1}'"); n != 1 {
		t.Fatalf("operator row kept: %d", n)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM idempotency WHERE principal LIKE 'node%' OR instr(CAST(body AS TEXT), 'secret-session') > 0"); n != 0 {
		t.Fatalf("%d agent rows kept", n)
	}
	d := s.Idempotency(func() time.Time { return time.UnixMilli(2000) })
	k := httpapi.IdempotencyKey{Principal: "operator", Resource: "PUT /x", Key: "k1"}
	if r, err := d.Begin(ctx, k, "fp2"); r != nil || err != nil {
		t.Fatalf("Begin after the migration = %v, %v", r, err)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM idempotency WHERE principal = 'operator' AND key = 'k1'"); n != 2 {
		t.Fatalf("%d rows for k1, want the old one and the scoped one", n)
	}
}
