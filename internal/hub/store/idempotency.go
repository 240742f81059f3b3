package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
)

// IdempotencyTTL is how long an Idempotency-Key is kept from its first use.
const IdempotencyTTL = 24 * time.Hour

// Idempotency is the durable httpapi.IdempotencyStore of a Store. The
// clock is the caller's (the store never reads the time itself). Claims in
// flight when the process stops are dropped at the next Open.
type Idempotency struct {
	s   *Store
	now func() time.Time
}

var _ httpapi.IdempotencyStore = (*Idempotency)(nil)

// Idempotency returns the store's IdempotencyStore reading time from now.
func (s *Store) Idempotency(now func() time.Time) *Idempotency {
	return &Idempotency{s: s, now: now}
}

// Begin implements httpapi.IdempotencyStore.
func (d *Idempotency) Begin(ctx context.Context, key httpapi.IdempotencyKey, fingerprint string) (*httpapi.StoredResponse, error) {
	now := d.now()
	var out *httpapi.StoredResponse
	err := d.s.write(ctx, func(ctx context.Context, q querier) error {
		out = nil
		var fp, header string
		var done, status int
		var body []byte
		var created int64
		err := q.QueryRowContext(ctx, `SELECT fingerprint, done, status, header, body, created_at FROM idempotency
			WHERE principal = ? AND resource = ? AND key = ?`, key.Principal, key.Resource, key.Key).Scan(&fp, &done, &status, &header, &body, &created)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case now.Sub(tm(created)) >= IdempotencyTTL:
			// Expired: the key starts over.
		case fp != fingerprint:
			return httpapi.ErrIdempotencyKeyReused
		case done == 0:
			return httpapi.ErrIdempotencyKeyInUse
		default:
			out = &httpapi.StoredResponse{Status: status, Header: http.Header{}, Body: body}
			if err := json.Unmarshal([]byte(header), &out.Header); err != nil {
				return err
			}
			return nil
		}
		_, err = q.ExecContext(ctx, `INSERT OR REPLACE INTO idempotency (principal, resource, key, fingerprint, done, created_at)
			VALUES (?,?,?,?,0,?)`, key.Principal, key.Resource, key.Key, fingerprint, ms(now))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Finish implements httpapi.IdempotencyStore. A claim that expired or was
// swept meanwhile is not recreated.
func (d *Idempotency) Finish(ctx context.Context, key httpapi.IdempotencyKey, fingerprint string, resp *httpapi.StoredResponse) error {
	var header []byte
	if resp != nil {
		h := http.Header{}
		for _, k := range []string{"Content-Type", "Location", "ETag"} {
			for _, v := range resp.Header.Values(k) {
				h.Add(k, v)
			}
		}
		var err error
		if header, err = json.Marshal(h); err != nil {
			return err
		}
	}
	return d.s.write(ctx, func(ctx context.Context, q querier) error {
		if resp == nil {
			_, err := q.ExecContext(ctx, `DELETE FROM idempotency WHERE principal = ? AND resource = ? AND key = ? AND fingerprint = ? AND done = 0`,
				key.Principal, key.Resource, key.Key, fingerprint)
			return err
		}
		_, err := q.ExecContext(ctx, `UPDATE idempotency SET done = 1, status = ?, header = ?, body = ?
			WHERE principal = ? AND resource = ? AND key = ? AND fingerprint = ? AND done = 0`,
			resp.Status, string(header), resp.Body, key.Principal, key.Resource, key.Key, fingerprint)
		return err
	})
}
