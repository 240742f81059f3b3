package hub

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/google/go-cmp/cmp"
)

// TestDurableIdempotency: the Hub's adapter keeps a response in the store
// and gives it back, maps the store's refusals onto the middleware's
// errors and reads the time from the Hub's clock.
func TestDurableIdempotency(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d := durableIdempotency{st: st, now: func() time.Time { return now }}
	k := httpapi.IdempotencyKey{Principal: "op", Resource: "PUT /x", Key: "k1"}
	if r, err := d.Begin(ctx, k, "fp1"); r != nil || err != nil {
		t.Fatalf("first Begin = %v, %v", r, err)
	}
	if _, err := d.Begin(ctx, k, "fp1"); !errors.Is(err, httpapi.ErrIdempotencyKeyInUse) {
		t.Errorf("in flight: %v", err)
	}
	if _, err := d.Begin(ctx, k, "fp2"); !errors.Is(err, httpapi.ErrIdempotencyKeyReused) {
		t.Errorf("other body: %v", err)
	}
	resp := &httpapi.StoredResponse{Status: 202, Header: http.Header{"Etag": {`"generation-1"`}, "Location": {"/x"}}, Body: []byte(`{"a":1}`)}
	if err := d.Finish(ctx, k, "fp1", resp); err != nil {
		t.Fatal(err)
	}
	got, err := d.Begin(ctx, k, "fp1")
	if err != nil || !cmp.Equal(resp, got) {
		t.Errorf("replay = %+v, %v; diff %s", got, err, cmp.Diff(resp, got))
	}
	if got != nil && got.Header.Get("ETag") != `"generation-1"` {
		t.Errorf("replayed ETag = %q", got.Header.Get("ETag"))
	}
	// A released claim (5xx) leaves the key to the retry.
	k2 := httpapi.IdempotencyKey{Principal: "op", Resource: "PUT /x", Key: "k2"}
	_, _ = d.Begin(ctx, k2, "fp")
	if err := d.Finish(ctx, k2, "fp", nil); err != nil {
		t.Fatal(err)
	}
	if r, err := d.Begin(ctx, k2, "fp"); r != nil || err != nil {
		t.Errorf("after release = %v, %v", r, err)
	}
	// The Hub's clock decides expiry.
	now = now.Add(store.IdempotencyTTL)
	if r, err := d.Begin(ctx, k, "fp9"); r != nil || err != nil {
		t.Errorf("after TTL = %v, %v", r, err)
	}
}
