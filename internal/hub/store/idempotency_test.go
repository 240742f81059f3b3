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
