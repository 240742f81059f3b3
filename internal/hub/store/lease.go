package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

var (
	// ErrFenced: a write carried a leader epoch (WithEpoch) that is no
	// longer the lease's: another Hub took the lease over, or this one
	// released it. The write changed nothing.
	ErrFenced = errors.New("write fenced: not the leader's epoch")
	// ErrLeaseHeld: another Hub holds the leader lease and it has not
	// expired. The error is a *LeaseHeldError naming the lease.
	ErrLeaseHeld = errors.New("leader lease held by another hub")
)

// LeaseHeldError is the ErrLeaseHeld of one claim: Lease is the lease as
// it stands.
type LeaseHeldError struct {
	Lease Lease
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("leader lease held by hub %s until %s (epoch %d)", e.Lease.HolderID,
		e.Lease.ExpiresAt.Format(time.RFC3339Nano), e.Lease.Epoch)
}

// Is makes errors.Is(err, ErrLeaseHeld) hold.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

// Lease is the leader lease of the Hubs that share the database.
type Lease struct {
	// HolderID names the Hub holding the lease; "" when none does (never
	// held, or released).
	HolderID string
	// HolderAddress is where the holder can be reached.
	HolderAddress string
	// Epoch is the fencing epoch of the holder's term: it grows by one at
	// every takeover and never goes back.
	Epoch int64
	// ExpiresAt is when the lease lapses unless renewed, on the holder's
	// clock.
	ExpiresAt time.Time
}

// Held reports whether some Hub holds the lease at now.
func (l Lease) Held(now time.Time) bool {
	return l.HolderID != "" && now.Before(l.ExpiresAt)
}

// LeaseClaim is one Hub's claim of the lease at Now, for TTL.
type LeaseClaim struct {
	HolderID string
	Address  string
	Now      time.Time
	TTL      time.Duration
}

func (c LeaseClaim) validate() error {
	if c.HolderID == "" || c.TTL <= 0 || c.Now.IsZero() {
		return fmt.Errorf("%w: lease claim needs a holder id, a time and a positive ttl", ErrInvalid)
	}
	return nil
}

type epochKey struct{}

// WithEpoch returns ctx carrying the leader epoch its writes are fenced
// on: a write run with it fails with ErrFenced, changing nothing, unless
// epoch is the lease's epoch and the lease is held when the write's
// transaction runs. The leader's loops run on such a context; operator and
// agent requests do not (any Hub accepts them).
func WithEpoch(ctx context.Context, epoch int64) context.Context {
	return context.WithValue(ctx, epochKey{}, epoch)
}

// EpochFrom returns the epoch WithEpoch put in ctx.
func EpochFrom(ctx context.Context) (int64, bool) {
	e, ok := ctx.Value(epochKey{}).(int64)
	return e, ok
}

const selectLease = "SELECT holder_id, holder_address, epoch, expires_at FROM hub_lease WHERE id = 1"

func readLease(ctx context.Context, q querier) (Lease, error) {
	var l Lease
	var exp int64
	err := q.QueryRowContext(ctx, selectLease).Scan(&l.HolderID, &l.HolderAddress, &l.Epoch, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, nil // a database migrated without the row: never held
	}
	l.ExpiresAt = tm(exp)
	return l, err
}

// fenceEpoch is the epoch a fenced write must carry in the current
// transaction: the lease's epoch when it is held, -1 when it was released.
// It reads the lease once per transaction (stmtConn.fenceKnown), until a
// lease write in the transaction forgets it.
func (s *stmtConn) fenceEpoch(ctx context.Context) (int64, error) {
	if s.fenceKnown {
		return s.fence, nil
	}
	l, err := readLease(ctx, s)
	if err != nil {
		return 0, err
	}
	s.fence, s.fenceKnown = l.Epoch, true
	if l.HolderID == "" {
		s.fence = -1
	}
	return s.fence, nil
}

// leaseWritten makes the writer read the lease again before the next
// fenced write of the transaction.
func leaseWritten(q querier) {
	if c, ok := q.(*stmtConn); ok {
		c.fenceKnown = false
	}
}

// GetLease returns the leader lease as it stands.
func (s *Store) GetLease(ctx context.Context) (Lease, error) {
	var l Lease
	err := s.read(ctx, func(q querier) error {
		var err error
		l, err = readLease(ctx, q)
		return err
	})
	return l, err
}

// AcquireLease acquires or renews the lease for c.HolderID at c.Now, until
// c.Now+c.TTL. The holder renews a lease it holds (the epoch stays); any
// Hub takes over a lease that expired or was released (the epoch grows by
// one, even when the same holder takes it back: its old term ended). A
// lease another Hub holds fails with a *LeaseHeldError and changes
// nothing. It returns the lease as written.
func (s *Store) AcquireLease(ctx context.Context, c LeaseClaim) (Lease, error) {
	return s.claimLease(ctx, c, false)
}

// TakeLease takes the lease for c.HolderID whoever holds it, with the
// epoch grown by one: for a Hub that owns its database alone (SQLite, held
// under the lock file), each start is a new term.
func (s *Store) TakeLease(ctx context.Context, c LeaseClaim) (Lease, error) {
	return s.claimLease(ctx, c, true)
}

func (s *Store) claimLease(ctx context.Context, c LeaseClaim, force bool) (Lease, error) {
	if err := c.validate(); err != nil {
		return Lease{}, err
	}
	var out Lease
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		leaseWritten(q)
		cur, err := readLease(ctx, q)
		if err != nil {
			return err
		}
		out = Lease{HolderID: c.HolderID, HolderAddress: c.Address, Epoch: cur.Epoch, ExpiresAt: c.Now.Add(c.TTL)}
		switch {
		case !force && cur.HolderID == c.HolderID && cur.Held(c.Now):
			// A renewal keeps the term.
		case !force && cur.Held(c.Now):
			return &LeaseHeldError{Lease: cur}
		default:
			out.Epoch++
		}
		_, err = q.ExecContext(ctx, "INSERT INTO hub_lease (id, holder_id, holder_address, epoch, expires_at) VALUES (1, ?, ?, ?, ?) "+
			"ON CONFLICT (id) DO UPDATE SET holder_id = excluded.holder_id, holder_address = excluded.holder_address, "+
			"epoch = excluded.epoch, expires_at = excluded.expires_at",
			out.HolderID, out.HolderAddress, out.Epoch, ms(out.ExpiresAt))
		return err
	})
	if err != nil {
		return Lease{}, err
	}
	return out, nil
}

// ReleaseLease gives up the lease holderID holds at epoch, on a clean
// shutdown, so that a standby can take it over at once (with the next
// epoch). A lease someone else holds, or a later term, is left as it is.
func (s *Store) ReleaseLease(ctx context.Context, holderID string, epoch int64) error {
	return s.write(ctx, func(ctx context.Context, q querier) error {
		leaseWritten(q)
		_, err := q.ExecContext(ctx, "UPDATE hub_lease SET holder_id = '', holder_address = '', expires_at = 0 WHERE id = 1 AND holder_id = ? AND epoch = ?",
			holderID, epoch)
		return err
	})
}

// Shared reports whether other Hubs may use the database at the same
// time, so that the leader lease must be renewed and may be lost: a
// PostgreSQL database. A SQLite file is never shared: one Store holds it
// (LockSuffix).
func (s *Store) Shared() bool { return s.d.postgres }
