package hub

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/store"
)

// durableIdempotency is the Hub's httpapi.IdempotencyStore: the store
// keeps the records in plain types, this turns a response into a record
// and back and the store's errors into the middleware's. The clock is the
// Hub's (the store never reads the time itself).
type durableIdempotency struct {
	st  *store.Store
	now func() time.Time
}

var _ httpapi.IdempotencyStore = durableIdempotency{}

func idempotencyKey(k httpapi.IdempotencyKey) store.IdempotencyKey {
	return store.IdempotencyKey{Principal: k.Principal, Resource: k.Resource, Key: k.Key}
}

// Begin implements httpapi.IdempotencyStore.
func (d durableIdempotency) Begin(ctx context.Context, key httpapi.IdempotencyKey, fingerprint string) (*httpapi.StoredResponse, error) {
	rec, err := d.st.BeginIdempotent(ctx, idempotencyKey(key), fingerprint, d.now())
	switch {
	case errors.Is(err, store.ErrIdempotencyKeyReused):
		return nil, httpapi.ErrIdempotencyKeyReused
	case errors.Is(err, store.ErrIdempotencyKeyInUse):
		return nil, httpapi.ErrIdempotencyKeyInUse
	case err != nil || rec == nil:
		return nil, err
	}
	return &httpapi.StoredResponse{Status: rec.Status, Header: http.Header(rec.Header), Body: rec.Body}, nil
}

// Finish implements httpapi.IdempotencyStore. The middleware hands over
// only the headers a replay carries (see httpapi.StoredResponse), so the
// record keeps resp's header as it is.
func (d durableIdempotency) Finish(ctx context.Context, key httpapi.IdempotencyKey, fingerprint string, resp *httpapi.StoredResponse) error {
	var rec *store.IdempotencyRecord
	if resp != nil {
		rec = &store.IdempotencyRecord{Status: resp.Status, Header: resp.Header, Body: resp.Body}
	}
	return d.st.FinishIdempotent(ctx, idempotencyKey(key), fingerprint, rec)
}
