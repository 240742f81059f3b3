package wal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowplane/flowplane/internal/lockfile"
)

// SyncMode says when appended entries are fsynced.
type SyncMode string

// The sync modes.
const (
	// SyncPerEntry writes and fsyncs each entry on its own before reporting
	// it durable: the slowest and simplest mode.
	SyncPerEntry SyncMode = "per_entry"
	// SyncGroupCommit writes everything appended since the last fsync in one
	// write and one fsync, and reports all of it durable together. Callers
	// that keep several appends in flight share fsyncs.
	SyncGroupCommit SyncMode = "group_commit"
	// SyncPeriodic writes each entry at once and reports it durable after the
	// write (it survives a crash of the process, not of the machine); the
	// files are fsynced every SyncInterval.
	SyncPeriodic SyncMode = "periodic"
)

// Defaults applied by Open to zero Options fields.
const (
	DefaultSync         = SyncGroupCommit
	DefaultSyncInterval = 100 * time.Millisecond
	DefaultSegmentBytes = 16 << 20
)

// Errors callers branch on.
var (
	// ErrOpen wraps every failure to create, read or write the WAL directory
	// or its files during Open.
	ErrOpen = errors.New("wal: cannot open")
	// ErrInvalidOptions reports Options that Open cannot use.
	ErrInvalidOptions = errors.New("wal: invalid options")
	// ErrClosed is returned by operations on a closed WAL.
	ErrClosed = errors.New("wal: closed")
	// ErrUnknownSeq is returned by Ack for a sequence number never appended.
	ErrUnknownSeq = errors.New("wal: unknown sequence number")
	// ErrTooLarge is returned for an entry larger than MaxEntryBytes.
	ErrTooLarge = errors.New("wal: entry too large")
	// ErrCorrupt reports a segment that changed after Open verified it.
	ErrCorrupt = errors.New("wal: corrupt segment")
	// ErrInUse is returned by Open for a directory another open WAL holds,
	// in this process or another; the error also matches
	// *lockfile.HeldError, which names the holder's pid.
	ErrInUse = errors.New("wal: directory in use")
)

// LockName is the lock file Open holds in the directory until Close.
const LockName = "flowplane.lock"

// Options configure a WAL.
type Options struct {
	Dir          string        // directory of the segment files; created if missing
	Sync         SyncMode      // default group_commit
	SyncInterval time.Duration // fsync period for periodic (also bounds how long acks wait to be written); default 100ms
	SegmentBytes int64         // size at which a segment is rolled; default 16 MiB
	Logger       *slog.Logger  // default discards
}

func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, fmt.Errorf("%w: empty dir", ErrInvalidOptions)
	}
	switch o.Sync {
	case "":
		o.Sync = DefaultSync
	case SyncPerEntry, SyncGroupCommit, SyncPeriodic:
	default:
		return o, fmt.Errorf("%w: unknown sync mode %q", ErrInvalidOptions, o.Sync)
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Recovery describes what Open found.
type Recovery struct {
	// Pending is the number of entries Replay will visit.
	Pending int
	// PendingBytes is the sum of their lengths.
	PendingBytes int64
	// TruncatedBytes counts the bytes dropped: a torn tail cut off the last
	// segment plus the unreadable rest of any damaged older segment.
	TruncatedBytes int64
	// CorruptSegment names the first older segment found damaged, or "".
	CorruptSegment string
}

// Stats is a snapshot of a WAL's counters.
type Stats struct {
	Appended uint64 // entries appended since Open
	Acked    uint64 // acknowledgements accepted since Open
	Pending  uint64 // entries not yet acknowledged, recovered ones included
	Segments int    // segment files
	Bytes    int64  // bytes in segment files
	Fsyncs   uint64 // fsyncs since Open (files and directory)
}

// pendingEntry is an appended entry the committer has not yet reported.
type pendingEntry struct {
	seq uint64
	end int // end offset of its record in the pending buffer
	ch  chan error
}

// WAL is an open write-ahead log. Its methods are safe for concurrent use.
type WAL struct {
	opts Options
	log  *slog.Logger

	lock   *lockfile.Lock // held from Open; the committer releases it on exit
	wake   chan struct{}  // buffered(1): there is something to commit
	done   chan struct{}  // closed when the committer has exited
	fsyncs atomic.Uint64

	mu       sync.Mutex // guards the fields below
	closed   bool
	err      error          // sticky write failure
	next     uint64         // sequence number of the next append
	written  uint64         // entries below this seq are in a segment
	buf      []byte         // records of entries not yet taken by the committer
	items    []pendingEntry // their waiters, in seq order
	acks     []uint64       // acknowledged seqs whose ack record is not yet written
	early    map[uint64]struct{}
	segs     []*segment // oldest first; the last is the active segment
	replay   []*segment // unacknowledged entries at Open, for Replay
	appended uint64
	acked    uint64
	pending  uint64

	// Owned by the committer goroutine.
	f          *os.File // the active segment
	size       int64    // bytes in the active segment
	entries    uint64   // entries in the active segment
	dirty      bool     // written since the last fsync
	failed     error
	ackBuf     []byte
	spareBuf   []byte
	spareItems []pendingEntry
	spareAcks  []uint64
	closeErr   error
	hookCommit func() // tests: called at the start of each commit round
}

// Open opens the WAL in opts.Dir, creating it if needed, and recovers its
// state: every record is verified, a torn tail is truncated, and a damaged
// older segment is reported in Recovery (see the package comment). The
// directory is locked (LockName) until Close, so that no other WAL value
// or process writes to it meanwhile: one that does fails with ErrInUse.
func Open(opts Options) (*WAL, Recovery, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, Recovery{}, err
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, Recovery{}, fmt.Errorf("%w: %w", ErrOpen, err)
	}
	lock, err := lockfile.Acquire(filepath.Join(opts.Dir, LockName))
	if errors.Is(err, lockfile.ErrHeld) {
		return nil, Recovery{}, fmt.Errorf("%w: %w", ErrInUse, err)
	}
	if err != nil {
		return nil, Recovery{}, fmt.Errorf("%w: %w", ErrOpen, err)
	}
	w := &WAL{
		opts:  opts,
		log:   opts.Logger.With("wal", opts.Dir),
		lock:  lock,
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
		early: make(map[uint64]struct{}),
	}
	rec, err := w.recover()
	if err != nil {
		if w.f != nil {
			_ = w.f.Close()
		}
		_ = lock.Release()
		return nil, Recovery{}, err
	}
	go w.run()
	return w, rec, nil
}

// AppendAsync appends data and returns at once with its sequence number and
// a channel that yields one value: nil once the entry is durable as the sync
// mode defines it, or the error that prevented it. data may be reused as
// soon as AppendAsync returns. Entries are assigned increasing sequence
// numbers in call order. AppendAsync never blocks: the caller bounds how
// many appends it keeps in flight (memory grows with them).
func (w *WAL) AppendAsync(data []byte) (uint64, <-chan error) {
	ch := make(chan error, 1)
	if len(data) > MaxEntryBytes {
		ch <- fmt.Errorf("%w: %d bytes", ErrTooLarge, len(data))
		return 0, ch
	}
	pcrc := payloadCRC(data)
	w.mu.Lock()
	if w.closed || w.err != nil {
		err := w.err
		if w.closed {
			err = ErrClosed
		}
		w.mu.Unlock()
		ch <- err
		return 0, ch
	}
	seq := w.next
	w.next++
	w.buf = appendRecord(w.buf, kindEntry, seq, pcrc, data)
	w.items = append(w.items, pendingEntry{seq: seq, end: len(w.buf), ch: ch})
	w.appended++
	w.pending++
	w.mu.Unlock()
	w.signal()
	return seq, ch
}

// Append appends data and waits until it is durable or ctx ends. When ctx
// ends first the entry may still be written; its seq is returned with the
// error.
func (w *WAL) Append(ctx context.Context, data []byte) (uint64, error) {
	seq, ch := w.AppendAsync(data)
	select {
	case err := <-ch:
		return seq, err
	case <-ctx.Done():
		return seq, ctx.Err()
	}
}

// Ack acknowledges entry seq: it will not be replayed after the ack record
// reaches the disk (next commit, sync interval or Close). Acks may come in any
// order; acking twice, or an entry already deleted, is a no-op. A segment
// file is deleted once all its entries are acknowledged, unless it is the
// active one.
func (w *WAL) Ack(seq uint64) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	if seq == 0 || seq >= w.next {
		w.mu.Unlock()
		return fmt.Errorf("%w: %d", ErrUnknownSeq, seq)
	}
	if seq >= w.written {
		// Acknowledged before it was written (before it was durable).
		if _, dup := w.early[seq]; !dup {
			w.early[seq] = struct{}{}
			w.noteAck(seq)
		}
		w.mu.Unlock()
		return nil
	}
	i := sort.Search(len(w.segs), func(i int) bool { return w.segs[i].first > seq }) - 1
	if i < 0 || !w.segs[i].contains(seq) || !w.segs[i].ack(seq) {
		w.mu.Unlock() // deleted, lost to damage, or acknowledged already
		return nil
	}
	w.noteAck(seq)
	var drop *segment
	if s := w.segs[i]; s.done() && i != len(w.segs)-1 {
		w.segs = slices.Delete(w.segs, i, i+1)
		drop = s
	}
	wake := len(w.acks) >= maxAcksPerRecord
	w.mu.Unlock()
	if drop != nil {
		w.remove(drop)
	}
	if wake {
		w.signal()
	}
	return nil
}

// noteAck counts a new acknowledgement and queues its record. w.mu is held.
func (w *WAL) noteAck(seq uint64) {
	w.acked++
	w.pending--
	w.acks = append(w.acks, seq)
}

// remove deletes the file of a fully acknowledged, inactive segment. A
// failure only leaves the file behind: its entries are acknowledged on disk
// and the next Open deletes it.
func (w *WAL) remove(s *segment) {
	if err := os.Remove(segPath(w.opts.Dir, s.first)); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.log.Warn("cannot delete acknowledged WAL segment", "segment", s.name(), "err", err)
	}
}

// Replay calls fn, in sequence order, with every entry that was not
// acknowledged when the WAL was opened (entries appended since are not
// visited). data belongs to fn. Replay stops at fn's first error and returns
// it.
func (w *WAL) Replay(fn func(seq uint64, data []byte) error) error {
	w.mu.Lock()
	closed, snap := w.closed, w.replay
	w.mu.Unlock()
	if closed {
		return ErrClosed
	}
	for _, s := range snap {
		if err := w.replaySegment(s, fn); err != nil {
			return err
		}
	}
	return nil
}

func (w *WAL) replaySegment(s *segment, fn func(seq uint64, data []byte) error) error {
	f, err := os.Open(segPath(w.opts.Dir, s.first))
	if errors.Is(err, os.ErrNotExist) {
		return nil // every entry was acknowledged and the file deleted since Open
	}
	if err != nil {
		return fmt.Errorf("wal: replay: %w", err)
	}
	defer f.Close()
	sc := newScanner(f, s.size, false)
	for {
		r, ok := sc.next()
		if !ok {
			break
		}
		if r.kind != kindEntry || !s.contains(r.seq) || s.isAcked(r.seq) {
			continue
		}
		if err := fn(r.seq, r.payload); err != nil {
			return err
		}
	}
	if sc.err != nil {
		if errors.Is(sc.err, errBadRecord) {
			return fmt.Errorf("%w: %s changed since Open", ErrCorrupt, s.name())
		}
		return fmt.Errorf("wal: replay %s: %w", s.name(), sc.err)
	}
	return nil
}

// Stats returns the current counters.
func (w *WAL) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := Stats{
		Appended: w.appended,
		Acked:    w.acked,
		Pending:  w.pending,
		Segments: len(w.segs),
		Fsyncs:   w.fsyncs.Load(),
	}
	for _, s := range w.segs {
		st.Bytes += s.size
	}
	return st
}

// Close writes and fsyncs everything appended before it (their channels
// then yield nil) and closes the files. Later Appends fail with ErrClosed;
// later Closes return the first one's result.
func (w *WAL) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.signal()
	<-w.done
	return w.closeErr
}

func (w *WAL) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}
