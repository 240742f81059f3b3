package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgConnectTimeout bounds connecting to PostgreSQL when the URL sets no
// connect_timeout: a Hub whose database does not answer fails to start
// (not ready) instead of hanging.
const pgConnectTimeout = 5 * time.Second

// IsPostgres reports whether storage (SVC_HUB_STORAGE) names a PostgreSQL
// database rather than a SQLite file.
func IsPostgres(storage string) bool {
	return strings.HasPrefix(storage, "postgres://") || strings.HasPrefix(storage, "postgresql://")
}

// openPostgres opens the writer's connection to the PostgreSQL database of
// url and the read pool, whose sessions are read-only. There is no lock
// file: several Hubs may share the database, their write transactions
// serialized by writeLockKey. Errors never hold url's password.
func (s *Store) openPostgres(ctx context.Context, url string) error {
	s.d.postgres = true
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// pgconn's parse errors show the URL with its password redacted.
		return storageErr(err)
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = pgConnectTimeout
	}
	s.pgConfig = cfg.Copy()
	rcfg := cfg.Copy()
	rcfg.RuntimeParams["default_transaction_read_only"] = "on"
	s.wdb = stdlib.OpenDB(*cfg)
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetConnMaxIdleTime(0)
	s.wdb.SetConnMaxLifetime(0)
	s.rdb = stdlib.OpenDB(*rcfg)
	cctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout+time.Second)
	defer cancel()
	if s.wconn, err = s.wdb.Conn(cctx); err != nil {
		return storageErr(err)
	}
	var version int
	if err := s.wconn.QueryRowContext(cctx, "SHOW server_version_num").Scan(&version); err != nil {
		return storageErr(err)
	}
	if version < 130000 {
		return fmt.Errorf("%w: PostgreSQL %d, want 13 or newer", ErrStorage, version)
	}
	return nil
}

// reconnect replaces the writer's PostgreSQL connection when it no longer
// answers (server restart, network): database/sql does not replace the
// connection a sql.Conn holds.
func (s *Store) reconnect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pgConnectTimeout)
	defer cancel()
	if s.wconn.PingContext(ctx) == nil {
		s.wbroken = false
		return nil
	}
	s.wq.close()
	_ = s.wconn.Close()
	c, err := s.wdb.Conn(ctx)
	if err != nil {
		return err
	}
	s.wconn, s.wq.c, s.wbroken = c, c, false
	return nil
}

// pgStorageClasses are the SQLSTATE classes that mean the database, not
// the request, failed: connection exception, insufficient resources,
// operator intervention, system error, internal error.
var pgStorageClasses = map[string]bool{"08": true, "53": true, "57": true, "58": true, "XX": true}

// pgStorageErr reports whether err is a PostgreSQL failure of the storage
// rather than of the request. A constraint violation (23xxx) is not one:
// it is what a SQLite constraint violation is.
func pgStorageErr(err error) bool {
	// A connection that could not be made is the storage's failure,
	// whatever the server answered (a refused login is class 28).
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return len(pe.Code) == 5 && pgStorageClasses[pe.Code[:2]]
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err)
}
