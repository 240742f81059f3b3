package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/flowplane/flowplane/internal/lockfile"
	"github.com/flowplane/flowplane/internal/wire"
)

// Errors callers branch on.
var (
	// ErrStorage wraps every failure of the disk or of the database itself
	// (SQLite: disk full, read-only file, I/O error, corruption, lock
	// timeout; PostgreSQL: connection refused or lost, server shutting
	// down, resources exhausted, internal error). The API answers 503
	// storage_unavailable. The write it came from left nothing.
	ErrStorage = errors.New("storage unavailable")
	// ErrClosed is returned by calls on a closed Store.
	ErrClosed = errors.New("store closed")
	// ErrNotFound: the named row does not exist (or was reclaimed).
	ErrNotFound = errors.New("not found")
	// ErrGenerationConflict: If-Match named another generation. The error is
	// a *GenerationConflictError carrying the current generation.
	ErrGenerationConflict = errors.New("generation conflict")
	// ErrNotCancellable: the intent is no longer pending.
	ErrNotCancellable = errors.New("operation not cancellable")
	// ErrNotPending: the intent cannot start an attempt (not pending).
	ErrNotPending = errors.New("intent not pending")
	// ErrAttemptFinished: the attempt already reached a terminal state.
	ErrAttemptFinished = errors.New("attempt already finished")
	// ErrSessionExpired: the session credential is past its expiry.
	ErrSessionExpired = errors.New("session expired")
	// ErrIdentityMismatch: a registration named a node id bound to another
	// node credential.
	ErrIdentityMismatch = errors.New("node identity mismatch")
	// ErrInvalid: an argument is out of range (page size, state name, ...).
	ErrInvalid = errors.New("invalid argument")
	// ErrSchemaTooNew: the database was written by a newer build.
	ErrSchemaTooNew = errors.New("database schema newer than this build")
	// ErrInUse: another Store, in this process or another, has the file
	// open. The error also matches *lockfile.HeldError, naming its pid.
	ErrInUse = errors.New("storage in use")
)

// LockSuffix names the lock file Open holds beside the database (path +
// LockSuffix) until Close, so that one Hub process at a time owns a file.
// It is a file of its own: SQLite's POSIX locks on the database itself are
// per process and guard transactions, not ownership.
const LockSuffix = ".lock"

// GenerationConflictError is the ErrGenerationConflict of one write.
type GenerationConflictError struct {
	Expected, Current int64
}

func (e *GenerationConflictError) Error() string {
	return fmt.Sprintf("generation conflict: expected %d, current %d", e.Expected, e.Current)
}

// Is makes errors.Is(err, ErrGenerationConflict) hold.
func (e *GenerationConflictError) Is(target error) bool { return target == ErrGenerationConflict }

// maxBatch bounds how many queued writes share one transaction.
const maxBatch = 256

// querier is what a write function or a read runs statements on.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type writeReq struct {
	ctx  context.Context
	fn   func(ctx context.Context, q querier) error
	done chan error
}

// Store is the Hub's durable state. It is safe for concurrent use. All
// writes go through one connection owned by the writer goroutine; reads
// use a separate pool.
type Store struct {
	d     dialect
	lock  *lockfile.Lock // nil for the in-memory database and PostgreSQL
	wdb   *sql.DB
	wconn *sql.Conn // owned by the writer goroutine after Open
	wq    *stmtConn // wconn with its statement cache; writer goroutine only
	// wbroken: the last write transaction failed in a way that may have
	// ended wconn (PostgreSQL only); the writer checks it before the next.
	wbroken bool
	rdb     *sql.DB
	rq      *readStmts // rdb's statement cache
	// txSlots bounds the read transactions open at once below the pool's
	// size: a transaction holds a connection, and preparing a statement it
	// runs for the first time takes another one from the pool.
	txSlots chan struct{}
	writes  chan writeReq
	quit    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once

	txns   atomic.Int64
	writen atomic.Int64
	reruns atomic.Int64
	// committed is the number of the last transaction the writer
	// committed: a read that starts after loading it sees at least that
	// transaction.
	committed atomic.Int64
	// onEvents, when set (SetEventSink, before any write), receives the
	// events of every committed transaction, in id order, on the writer
	// goroutine right after its COMMIT. It must not keep the slice.
	onEvents func([]wire.Event)

	// origin names this store's Hub in its change notifications
	// (SetOrigin); pgConfig is the PostgreSQL connection configuration
	// Watch listens with (nil on SQLite).
	origin   string
	pgConfig *pgx.ConnConfig

	// hook, when set (tests only, before any write), is called at named
	// points inside write functions; an error aborts that function.
	hook func(point string) error
}

// Stats counts the writer's work since Open.
type Stats struct {
	// Transactions committed or rolled back by the writer.
	Transactions int64
	// Writes is the number of write functions run.
	Writes int64
	// Reruns counts the batches run again with a savepoint per write
	// because one of their writes failed.
	Reruns int64
}

// SetEventSink makes fn receive the events of every transaction the writer
// commits, in id order, as ListEvents would read them, right after the
// commit: the events are durable when fn sees them. fn runs on the writer
// goroutine, must not wait for a write and must not keep the slice (the
// events may be copied). Call it before the first write.
func (s *Store) SetEventSink(fn func([]wire.Event)) { s.onEvents = fn }

// Committed returns the number of the last committed write transaction
// (0 before the first). A read started after Committed returned n sees
// every write of transaction n and earlier; DesiredResult.Txn names the
// transaction of a write.
func (s *Store) Committed() int64 { return s.committed.Load() }

// Stats returns the writer's counters; Writes/Transactions > 1 shows group
// commit at work.
func (s *Store) Stats() Stats {
	return Stats{Transactions: s.txns.Load(), Writes: s.writen.Load(), Reruns: s.reruns.Load()}
}

var memSeq atomic.Int64

// walSizeLimit is the size the WAL file is truncated to after a
// checkpoint.
const walSizeLimit = 64 << 20

// Open opens the Hub's storage and starts the writer. storage is a
// PostgreSQL URL (postgres:// or postgresql://; see openPostgres) or the
// path of a SQLite database, created if needed; "" opens a volatile
// in-memory SQLite database, for SVC_HUB_INSECURE_LOCAL without storage.
// Open applies the pending migrations. A SQLite file another Store holds
// fails with ErrInUse; a database that cannot be reached fails with
// ErrStorage. On any failure nothing stays open and the error is returned.
func Open(ctx context.Context, storage string) (*Store, error) {
	s := &Store{writes: make(chan writeReq), quit: make(chan struct{})}
	var err error
	if IsPostgres(storage) {
		err = s.openPostgres(ctx, storage)
	} else {
		err = s.openSQLite(ctx, storage)
	}
	if err == nil {
		err = s.start(ctx)
	}
	if err != nil {
		if s.wconn != nil {
			_ = s.wconn.Close()
		}
		if s.wdb != nil {
			_ = s.wdb.Close()
		}
		if s.rdb != nil {
			_ = s.rdb.Close()
		}
		_ = s.lock.Release()
		return nil, err
	}
	return s, nil
}

// openSQLite opens the writer's connection to the SQLite database at path
// ("" in memory) and the read pool, holding the lock file beside it.
func (s *Store) openSQLite(ctx context.Context, path string) error {
	var wdsn, rdsn string
	if path == "" {
		// memdb VFS: one in-memory database shared by the writer and readers
		// of this Store only; the name is a per-process counter, not an id.
		name := fmt.Sprintf("/flowplane-hub-%d", memSeq.Add(1))
		base := "file:" + name + "?vfs=memdb&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
		wdsn, rdsn = base, base+"&_pragma=query_only(1)"
	} else {
		u := url.URL{Scheme: "file", Opaque: url.PathEscape(path)}
		// temp_store(2) keeps the statement journal of the per-write
		// savepoints in memory: in a file it cost a pwrite per journaled
		// page and 4-byte page number, a fifth of the writer's CPU.
		// journal_size_limit truncates the WAL after a checkpoint: a burst
		// of large reports must not leave it at its high-water mark.
		base := u.String() + "?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=temp_store(2)" +
			"&_pragma=journal_size_limit(" + strconv.Itoa(walSizeLimit) + ")"
		wdsn, rdsn = base, base+"&_pragma=query_only(1)"
	}
	if path != "" {
		if err := ownerOnly(path); err != nil {
			return storageErr(err)
		}
		var err error
		s.lock, err = lockfile.Acquire(path + LockSuffix)
		if errors.Is(err, lockfile.ErrHeld) {
			return fmt.Errorf("%w: %w", ErrInUse, err)
		}
		if err != nil {
			return storageErr(err)
		}
	}
	var err error
	if s.wdb, err = sql.Open("sqlite", wdsn); err != nil {
		return storageErr(err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetConnMaxIdleTime(0)
	s.wdb.SetConnMaxLifetime(0)
	if s.wconn, err = s.wdb.Conn(ctx); err != nil {
		return storageErr(err)
	}
	if path != "" {
		var mode string
		if err := s.wconn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			return storageErr(err)
		}
		if mode != "wal" {
			return fmt.Errorf("%w: journal_mode is %q, want wal", ErrStorage, mode)
		}
		var sync int
		if err := s.wconn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			return storageErr(err)
		}
		if sync != 2 {
			return fmt.Errorf("%w: synchronous is %d, want 2 (FULL)", ErrStorage, sync)
		}
	}
	if s.rdb, err = sql.Open("sqlite", rdsn); err != nil {
		return storageErr(err)
	}
	return nil
}

// start migrates and checks the database Open opened and starts the
// writer.
func (s *Store) start(ctx context.Context) error {
	if err := migrate(ctx, s.wconn, &s.d); err != nil {
		return err
	}
	if !s.d.postgres {
		if err := quickCheck(ctx, s.wconn); err != nil {
			return err
		}
	}
	// Claims of requests that were in flight when the process died are
	// void. A shared database holds other Hubs' claims in flight: there
	// they lapse after ClaimTimeout.
	if !s.d.postgres {
		if _, err := s.wconn.ExecContext(ctx, "DELETE FROM idempotency WHERE done = 0"); err != nil {
			return storageErr(err)
		}
	}
	s.rdb.SetMaxOpenConns(readConns)
	// Idle connections stay open, with the statements prepared on them.
	s.rdb.SetMaxIdleConns(readConns)
	if err := s.rdb.PingContext(ctx); err != nil {
		return storageErr(err)
	}
	s.rq = &readStmts{db: s.rdb, d: &s.d, stmts: map[string]*sql.Stmt{}}
	s.txSlots = make(chan struct{}, readConns-1)
	s.wq = &stmtConn{c: s.wconn, d: &s.d, stmts: map[string]*sql.Stmt{}, logging: true}
	s.wg.Add(1)
	go s.writer()
	return nil
}

func quickCheck(ctx context.Context, q querier) error {
	rows, err := q.QueryContext(ctx, "PRAGMA quick_check")
	if err != nil {
		return storageErr(err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() && len(problems) < 10 {
		var line string
		if err := rows.Scan(&line); err != nil {
			return storageErr(err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return storageErr(err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: quick_check: %v", ErrStorage, problems)
	}
	return nil
}

// Close stops the writer after the write in progress and closes the
// database. Calls after Close return ErrClosed.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		close(s.quit)
		s.wg.Wait()
		s.rq.close()
		err = errors.Join(s.wconn.Close(), s.wdb.Close(), s.rdb.Close())
		// Only once SQLite closed the file may another process own it.
		err = errors.Join(err, s.lock.Release())
	})
	return err
}

// write runs fn in the writer's next transaction, inside its own
// savepoint, and returns once that transaction is committed (fn's changes
// are on disk) or fn's changes are rolled back. fn must not retain q.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, q querier) error) error {
	req := writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.writes <- req:
	case <-s.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// The writer answers every request it takes, so this wait is bounded by
	// one batch.
	return <-req.done
}

func (s *Store) writer() {
	defer s.wg.Done()
	defer s.wq.close()
	batch := make([]writeReq, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case r := <-s.writes:
			batch = append(batch, r)
		case <-s.quit:
			s.drain()
			return
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case r := <-s.writes:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		s.runBatch(batch)
	}
}

// drain answers requests queued when Close was called.
func (s *Store) drain() {
	for {
		select {
		case r := <-s.writes:
			r.done <- ErrClosed
		default:
			return
		}
	}
}

func (s *Store) runBatch(batch []writeReq) {
	results := make([]error, len(batch), maxBatch)
	txn := s.txns.Add(1)
	// Most batches succeed whole: they run without a savepoint per write,
	// whose statement journal copies every page a write touches first, and
	// take in the writes that arrive meanwhile. A write that fails rolls the
	// attempt back, and the batch runs again with a savepoint around each
	// write, so that only the failed one is undone. Write functions start
	// from scratch each time they run.
	batch, results, again, ran := s.runTxn(batch, results, txn, false)
	if again {
		s.reruns.Add(1)
		clear(results)
		_, _, _, ran = s.runTxn(batch, results, txn, true)
	}
	s.writen.Add(int64(ran))
	for i, r := range batch {
		r.done <- results[i]
	}
}

// runTxn runs batch in one transaction and fills results. Without
// isolate, it also runs the writes queued while it runs (up to maxBatch)
// and returns the batch and results so grown; the first failed write rolls
// everything back and runTxn returns again (for a batch of one, the
// transaction was the write's own and its error is the result). With
// isolate, each write runs inside its own savepoint and a failed write is
// undone alone. ran counts the write functions it called.
func (s *Store) runTxn(batch []writeReq, results []error, txn int64, isolate bool) (_ []writeReq, _ []error, again bool, ran int) {
	ctx := context.Background() // a caller's cancellation must not break the shared transaction
	c := s.wq
	c.txn = txn
	c.logged = c.logged[:0]
	c.fenceKnown = false
	clear(c.notes)
	if err := s.begin(ctx); err != nil {
		for i := range results {
			results[i] = storageErr(err)
		}
		return batch, results, false, ran
	}
	abort := func(err error) {
		s.wbroken = s.d.postgres // the connection may be gone
		_, _ = c.ExecContext(ctx, "ROLLBACK")
		for i := range results {
			if results[i] == nil || !isDomain(results[i]) {
				results[i] = storageErr(err)
			}
		}
	}
	for i := 0; ; i++ {
		if i == len(batch) {
			if isolate || len(batch) >= maxBatch {
				break
			}
			select {
			case r := <-s.writes:
				batch, results = append(batch, r), append(results, nil)
			default:
			}
			if i == len(batch) {
				break
			}
		}
		r := batch[i]
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if epoch, ok := EpochFrom(r.ctx); ok {
			// A fenced write of a deposed leader does not run at all.
			cur, err := c.fenceEpoch(ctx)
			if err != nil {
				abort(err)
				return batch, results, false, ran
			}
			if cur != epoch {
				results[i] = ErrFenced
				continue
			}
		}
		if isolate {
			if _, err := c.ExecContext(ctx, "SAVEPOINT w"); err != nil {
				abort(err)
				return batch, results, false, ran
			}
		}
		mark := len(c.logged)
		ran++
		err := r.fn(ctx, c)
		switch {
		case err == nil:
		case !isolate && len(batch) == 1:
			// The transaction was the write's own savepoint.
			results[i] = classify(err)
			if _, rerr := c.ExecContext(ctx, "ROLLBACK"); rerr != nil {
				results[i] = storageErr(errors.Join(err, rerr))
				s.wbroken = s.d.postgres
			}
			return batch, results, false, ran
		case !isolate:
			_, _ = c.ExecContext(ctx, "ROLLBACK")
			return batch, results, true, ran
		default:
			c.logged = c.logged[:mark] // rolled back with the savepoint
			results[i] = classify(err)
			// SQLite may have rolled the whole transaction back itself (disk
			// full, I/O error); then ROLLBACK TO fails and the batch is lost.
			if _, rerr := c.ExecContext(ctx, "ROLLBACK TO w"); rerr != nil {
				abort(errors.Join(err, rerr))
				return batch, results, false, ran
			}
		}
		if isolate {
			if _, err := c.ExecContext(ctx, "RELEASE w"); err != nil {
				abort(err)
				return batch, results, false, ran
			}
		}
	}
	// The notes go out at COMMIT, and only if it commits.
	if err := s.sendNotes(ctx); err != nil {
		abort(err)
		return batch, results, false, ran
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		abort(err)
		return batch, results, false, ran
	}
	s.committed.Store(txn)
	if s.onEvents != nil && len(c.logged) > 0 {
		s.onEvents(c.logged)
	}
	return batch, results, false, ran
}

// begin starts the writer's next transaction.
func (s *Store) begin(ctx context.Context) error {
	if s.wbroken {
		if err := s.reconnect(ctx); err != nil {
			return err
		}
	}
	exec := s.wq.ExecContext
	if s.d.postgres {
		exec = s.wq.c.ExecContext // not prepared: two statements
	}
	for _, q := range s.d.begin() {
		if _, err := exec(ctx, q); err != nil {
			s.wbroken = s.d.postgres
			if s.d.postgres {
				// A failed advisory lock leaves the transaction open.
				_, _ = s.wq.ExecContext(ctx, "ROLLBACK")
			}
			return err
		}
	}
	return nil
}

// isDomain reports whether err is a caller-facing condition rather than a
// storage failure.
func isDomain(err error) bool {
	return err != nil && !errors.Is(err, ErrStorage)
}

// storageCodes are the primary SQLite result codes that mean the storage,
// not the request, failed.
var storageCodes = map[int]bool{
	sqlite3.SQLITE_FULL: true, sqlite3.SQLITE_IOERR: true, sqlite3.SQLITE_READONLY: true,
	sqlite3.SQLITE_CANTOPEN: true, sqlite3.SQLITE_CORRUPT: true, sqlite3.SQLITE_NOTADB: true,
	sqlite3.SQLITE_BUSY: true, sqlite3.SQLITE_LOCKED: true, sqlite3.SQLITE_NOMEM: true,
	sqlite3.SQLITE_PROTOCOL: true, sqlite3.SQLITE_NOLFS: true, sqlite3.SQLITE_PERM: true,
}

// classify wraps storage failures in ErrStorage and leaves domain errors
// as they are.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrStorage) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err // the caller went away; the storage is fine
	}
	var se *sqlite.Error
	if errors.As(err, &se) && storageCodes[se.Code()&0xff] {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if pgStorageErr(err) {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if errors.Is(err, sql.ErrConnDone) || errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return err
}

// storageErr wraps any error of the database layer in ErrStorage.
func storageErr(err error) error {
	if err == nil || errors.Is(err, ErrStorage) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrStorage, err)
}

// read runs fn on the reader pool and classifies its error.
func (s *Store) read(ctx context.Context, fn func(q querier) error) error {
	select {
	case <-s.quit:
		return ErrClosed
	default:
	}
	return classify(fn(readQuerier{r: s.rq}))
}

// readConns is the size of the read pool.
const readConns = 4

// readTx runs fn in one read transaction (a consistent snapshot).
func (s *Store) readTx(ctx context.Context, fn func(q querier) error) error {
	select {
	case s.txSlots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.quit:
		return ErrClosed
	}
	defer func() { <-s.txSlots }()
	opts := &sql.TxOptions{ReadOnly: true}
	if s.d.postgres {
		// A snapshot for the whole transaction, as SQLite's read
		// transaction is (READ COMMITTED takes one per statement).
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := s.rdb.BeginTx(ctx, opts)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr // the caller went away; the storage is fine
		}
		return storageErr(err)
	}
	defer func() { _ = tx.Rollback() }()
	return classify(fn(readQuerier{r: s.rq, tx: tx}))
}

// at calls the test hook.
func (s *Store) at(point string) error {
	if s.hook == nil {
		return nil
	}
	return s.hook(point)
}

// ms is t as stored: Unix milliseconds, 0 for the zero time.
func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// tm is the inverse of ms, in UTC.
func tm(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// ownerOnly creates the database file readable and writable by its owner
// only (0600), as the node's state is, before SQLite opens it: SQLite gives
// the -wal and -shm files it creates the database file's permissions. Files
// of an older Hub that are open to group or others are narrowed to 0600.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil {
				return err
			}
		}
	}
	return nil
}
