package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// IdempotencyTTL is how long an Idempotency-Key is kept from its first use.
const IdempotencyTTL = 24 * time.Hour

// ClaimTimeout is how long an unfinished Idempotency-Key claim holds its
// key: past it the request that claimed it is taken to be gone (its Hub
// died; on a shared database no other Hub may drop the claims of a Hub
// that restarts) and the key starts over. Requests finish their claims in
// well under a second.
const ClaimTimeout = 2 * time.Minute

// Errors of BeginIdempotent.
var (
	// ErrIdempotencyKeyReused: the key was first used with another
	// fingerprint.
	ErrIdempotencyKeyReused = errors.New("idempotency key reused with a different request")
	// ErrIdempotencyKeyInUse: the first request with the key has not
	// finished.
	ErrIdempotencyKeyInUse = errors.New("idempotency key in use by a request in flight")
)

// IdempotencyKey names one key of one principal on one resource (the
// method and escaped path): keys of different principals never meet, and
// the same key on another resource is another claim.
type IdempotencyKey struct {
	Principal string
	Resource  string
	Key       string
}

// IdempotencyRecord is the finished outcome kept for a key: a status,
// header values by name and the body, stored as given and returned as
// stored. Which headers are worth keeping is the caller's choice.
type IdempotencyRecord struct {
	Status int
	Header map[string][]string
	Body   []byte
}

// BeginIdempotent claims key at now for a request identified by
// fingerprint (compared verbatim). It returns (nil, nil) when the caller
// now owns the key and must call FinishIdempotent; the record when a
// request with the same fingerprint already finished;
// ErrIdempotencyKeyReused when the key belongs to another fingerprint;
// ErrIdempotencyKeyInUse when the claim is not finished. A key older than
// IdempotencyTTL starts over, and so does an unfinished claim older than
// ClaimTimeout. On SQLite, claims in flight when the process stops are
// dropped at the next Open.
func (s *Store) BeginIdempotent(ctx context.Context, key IdempotencyKey, fingerprint string, now time.Time) (*IdempotencyRecord, error) {
	var out *IdempotencyRecord
	err := s.write(ctx, func(ctx context.Context, q querier) error {
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
			return ErrIdempotencyKeyReused
		case done == 0 && now.Sub(tm(created)) < ClaimTimeout:
			return ErrIdempotencyKeyInUse
		case done == 0:
			// Abandoned: the key starts over.
		default:
			out = &IdempotencyRecord{Status: status, Header: map[string][]string{}, Body: body}
			if err := json.Unmarshal([]byte(header), &out.Header); err != nil {
				return fmt.Errorf("idempotency record header: %w", err)
			}
			return nil
		}
		_, err = q.ExecContext(ctx, `INSERT INTO idempotency (principal, resource, key, fingerprint, done, created_at)
			VALUES (?,?,?,?,0,?) ON CONFLICT (principal, resource, key) DO UPDATE SET fingerprint = excluded.fingerprint,
			done = 0, status = 0, header = '{}', body = NULL, created_at = excluded.created_at`, key.Principal, key.Resource, key.Key, fingerprint, ms(now))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FinishIdempotent stores rec as the outcome of key's claim, or releases
// the claim when rec is nil (the request may be retried). A claim that
// expired or was swept meanwhile is not recreated.
func (s *Store) FinishIdempotent(ctx context.Context, key IdempotencyKey, fingerprint string, rec *IdempotencyRecord) error {
	var header []byte
	if rec != nil {
		h := rec.Header
		if h == nil {
			h = map[string][]string{}
		}
		var err error
		if header, err = json.Marshal(h); err != nil {
			return err
		}
	}
	return s.write(ctx, func(ctx context.Context, q querier) error {
		if rec == nil {
			_, err := q.ExecContext(ctx, `DELETE FROM idempotency WHERE principal = ? AND resource = ? AND key = ? AND fingerprint = ? AND done = 0`,
				key.Principal, key.Resource, key.Key, fingerprint)
			return err
		}
		_, err := q.ExecContext(ctx, `UPDATE idempotency SET done = 1, status = ?, header = ?, body = ?
			WHERE principal = ? AND resource = ? AND key = ? AND fingerprint = ? AND done = 0`,
			rec.Status, string(header), rec.Body, key.Principal, key.Resource, key.Key, fingerprint)
		return err
	})
}
