package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestIdempotency(t *testing.T) { backends(t, testIdempotency) }

func testIdempotency(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	k := IdempotencyKey{Principal: "op", Key: "k1"}
	if r, err := s.BeginIdempotent(ctx, k, "fp1", t0); r != nil || err != nil {
		t.Fatalf("first Begin = %v, %v", r, err)
	}
	if _, err := s.BeginIdempotent(ctx, k, "fp1", t0); !errors.Is(err, ErrIdempotencyKeyInUse) {
		t.Errorf("in flight: %v", err)
	}
	if _, err := s.BeginIdempotent(ctx, k, "fp2", t0); !errors.Is(err, ErrIdempotencyKeyReused) {
		t.Errorf("other body: %v", err)
	}
	if r, err := s.BeginIdempotent(ctx, IdempotencyKey{Principal: "other", Key: "k1"}, "fp2", t0); r != nil || err != nil {
		t.Errorf("other principal = %v, %v", r, err)
	}
	resp := &IdempotencyRecord{Status: 202, Header: map[string][]string{"Etag": {`"generation-1"`}, "Location": {"/x"}, "X-Other": {"no"}}, Body: []byte(`{"a":1}`)}
	if err := s.FinishIdempotent(ctx, k, "fp1", resp); err != nil {
		t.Fatal(err)
	}
	// The record comes back as given: which headers to keep is the caller's choice.
	want := &IdempotencyRecord{Status: 202, Header: map[string][]string{"Etag": {`"generation-1"`}, "Location": {"/x"}, "X-Other": {"no"}}, Body: []byte(`{"a":1}`)}
	got, err := s.BeginIdempotent(ctx, k, "fp1", t0)
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("replay = %+v, %v; diff %s", got, err, cmp.Diff(want, got))
	}
	// Released claim (5xx): retry owns the key again.
	k2 := IdempotencyKey{Principal: "op", Key: "k2"}
	_, _ = s.BeginIdempotent(ctx, k2, "fp", t0)
	if err := s.FinishIdempotent(ctx, k2, "fp", nil); err != nil {
		t.Fatal(err)
	}
	if r, err := s.BeginIdempotent(ctx, k2, "fp", t0); r != nil || err != nil {
		t.Errorf("after release = %v, %v", r, err)
	}
	// Durable across reopen; in-flight claims dropped.
	_ = s.Close()
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got, err := s2.BeginIdempotent(ctx, k, "fp1", t0); err != nil || got == nil || got.Status != 202 {
		t.Errorf("after reopen = %+v, %v", got, err)
	}
	// In-flight claims: SQLite drops them at Open; a shared PostgreSQL
	// database keeps them (other Hubs' requests hold them) until
	// ClaimTimeout.
	if onPostgres(t) {
		if _, err := s2.BeginIdempotent(ctx, k2, "fp", t0.Add(ClaimTimeout-time.Millisecond)); !errors.Is(err, ErrIdempotencyKeyInUse) {
			t.Errorf("claim in flight on a shared database, before ClaimTimeout: %v", err)
		}
		if r, err := s2.BeginIdempotent(ctx, k2, "fp", t0.Add(ClaimTimeout)); r != nil || err != nil {
			t.Errorf("abandoned claim at ClaimTimeout = %v, %v", r, err)
		}
	} else if r, err := s2.BeginIdempotent(ctx, k2, "fp", t0); r != nil || err != nil {
		t.Errorf("stale in-flight claim survived reopen: %v, %v", r, err)
	}
	// Expired after 24 h: the key starts over, even with another body.
	if r, err := s2.BeginIdempotent(ctx, k, "fp9", t0.Add(IdempotencyTTL)); r != nil || err != nil {
		t.Errorf("after TTL = %v, %v", r, err)
	}
}

// TestIdempotencyScopedByResource: the same key of one principal on another
// resource is another request.
func TestIdempotencyScopedByResource(t *testing.T) { backends(t, testIdempotencyScopedByResource) }

func testIdempotencyScopedByResource(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	a := IdempotencyKey{Principal: "op", Resource: "PUT /a", Key: "k1"}
	b := IdempotencyKey{Principal: "op", Resource: "PUT /b", Key: "k1"}
	if r, err := s.BeginIdempotent(ctx, a, "fp1", t0); r != nil || err != nil {
		t.Fatalf("Begin a = %v, %v", r, err)
	}
	if err := s.FinishIdempotent(ctx, a, "fp1", &IdempotencyRecord{Status: 202, Header: map[string][]string{}, Body: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.BeginIdempotent(ctx, b, "fp1", t0); r != nil || err != nil {
		t.Fatalf("same key on another resource = %v, %v; want a new claim", r, err)
	}
	if _, err := s.BeginIdempotent(ctx, a, "fp2", t0); !errors.Is(err, ErrIdempotencyKeyReused) {
		t.Fatalf("same key and resource, other body: %v", err)
	}
	if r, err := s.BeginIdempotent(ctx, a, "fp1", t0); err != nil || r == nil || string(r.Body) != "a" {
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
	k := IdempotencyKey{Principal: "operator", Resource: "PUT /x", Key: "k1"}
	if r, err := s.BeginIdempotent(ctx, k, "fp2", time.UnixMilli(2000)); r != nil || err != nil {
		t.Fatalf("Begin after the migration = %v, %v", r, err)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM idempotency WHERE principal = 'operator' AND key = 'k1'"); n != 2 {
		t.Fatalf("%d rows for k1, want the old one and the scoped one", n)
	}
}
