package objstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Defaults applied by Open to zero Options fields (ArkFlow's balanced
// preset and its cursor and shutdown defaults).
const (
	DefaultMaxEntries       = 1000
	DefaultMaxBytes         = 1 << 20
	DefaultWorkers          = 1
	DefaultCursorMaxEntries = 1000
	DefaultCursorInterval   = time.Second
	DefaultShutdownTimeout  = 30 * time.Second
)

// Errors callers branch on.
var (
	// ErrOpen wraps every failure to list or read the bucket during Open.
	ErrOpen = errors.New("objstore: cannot open WAL")
	// ErrInvalidOptions reports Options that Open cannot use.
	ErrInvalidOptions = errors.New("objstore: invalid options")
	// ErrClosed is returned by operations on a closed WAL.
	ErrClosed = errors.New("objstore: closed")
	// ErrUnknownSeq is returned by Ack for a sequence number never appended.
	ErrUnknownSeq = errors.New("objstore: unknown sequence number")
	// ErrTooLarge is returned for an entry larger than MaxEntryBytes.
	ErrTooLarge = errors.New("objstore: entry too large")
)

// Preset returns the segment limits of one of ArkFlow's segment_tuning
// strategies, and false for an unknown name.
func Preset(strategy string) (maxEntries int, maxBytes int64, ok bool) {
	switch strategy {
	case "aggressive":
		return 10000, 10 << 20, true
	case "balanced", "":
		return DefaultMaxEntries, DefaultMaxBytes, true
	case "low_latency":
		return 100, 100 << 10, true
	}
	return 0, 0, false
}

// Options configure a WAL.
type Options struct {
	// Bucket holds the WAL; Close closes it.
	Bucket *blob.Bucket
	// Prefix is the key prefix of this WAL (a slash is added if missing).
	Prefix string
	// MaxEntries and MaxBytes bound a segment; an entry larger than
	// MaxBytes gets a segment of its own.
	MaxEntries int
	MaxBytes   int64
	// Workers is the number of segment PUTs in flight at once.
	Workers int
	// Compression of segment bodies of MinCompressBytes and more.
	Compression Compression
	// The cursor is written after CursorMaxEntries acknowledgements, or
	// CursorInterval after it last moved, whichever comes first.
	CursorMaxEntries int
	CursorInterval   time.Duration
	// ShutdownTimeout bounds how long Close waits for PUTs in flight.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.Bucket == nil {
		return o, fmt.Errorf("%w: no bucket", ErrInvalidOptions)
	}
	if o.Prefix != "" && !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.CursorMaxEntries <= 0 {
		o.CursorMaxEntries = DefaultCursorMaxEntries
	}
	if o.CursorInterval <= 0 {
		o.CursorInterval = DefaultCursorInterval
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Recovery describes what Open found.
type Recovery struct {
	// Pending is the number of entries Replay will visit; PendingBytes
	// the sum of their lengths.
	Pending      int
	PendingBytes int64
	// Cursor is the cursor read (1 when there was none).
	Cursor uint64
	// Segments is the number of segments at or past the cursor.
	Segments int
	// CorruptSegments counts the segments that failed verification and
	// were skipped (their entries are lost); CorruptKeys names them.
	CorruptSegments int
	CorruptKeys     []string
}

// Stats is a snapshot of a WAL's counters.
type Stats struct {
	Appended uint64 // entries appended since Open
	Acked    uint64 // acknowledgements accepted since Open
	Pending  uint64 // entries not yet acknowledged, recovered ones included
	Puts     uint64 // segment PUTs that succeeded since Open
	Failed   uint64 // segment PUTs that failed
	Cursor   uint64 // the last cursor written
	Segments int    // segments in the bucket known to this WAL
}

// segInfo is a stored segment: entries first..first+count-1.
type segInfo struct {
	first uint64
	count uint64
	key   string
}

func (s segInfo) end() uint64 { return s.first + s.count }

// pending is an entry appended but not yet taken into a segment.
type pending struct {
	seq  uint64
	data []byte
	ch   chan error
}

// WAL is an object-store write-ahead log. Its methods are safe for
// concurrent use.
type WAL struct {
	opts Options
	b    *blob.Bucket
	log  *slog.Logger

	ctx    context.Context // PUTs and cursor writes; cancelled ShutdownTimeout after Close
	cancel context.CancelFunc
	wake   chan struct{} // buffered(1): there is something to seal or a PUT ended
	cwake  chan struct{} // buffered(1): the cursor may be written
	done   chan struct{} // closed when the committer has exited
	cdone  chan struct{} // closed when the cursor writer has exited
	puts   sync.WaitGroup

	mu       sync.Mutex // guards the fields below
	closed   bool
	next     uint64              // sequence number of the next append
	queue    []pending           // appended, not yet in a segment
	inflight int                 // segment PUTs under way
	segs     []segInfo           // stored segments, in seq order
	low      uint64              // every entry below is acknowledged (or lost)
	gone     map[uint64]struct{} // acknowledged or lost entries at or above low
	sinceCur int                 // acknowledgements since the last cursor write
	written  uint64              // the cursor last written
	replay   []segInfo           // segments with entries to replay, at Open
	replayLo uint64              // the cursor at Open
	appended uint64
	acked    uint64
	npending uint64
	nputs    uint64
	nfailed  uint64

	hookPut func(key string) error // tests: called before each segment PUT; an error fails it

	rmu    sync.Mutex // guards the Read cache
	rcache struct {
		key string
		seg Segment
	}
}

// Open opens the WAL under opts.Prefix in opts.Bucket and recovers it:
// see the package comment.
func Open(ctx context.Context, opts Options) (*WAL, Recovery, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, Recovery{}, err
	}
	w := &WAL{
		opts:  opts,
		b:     opts.Bucket,
		log:   opts.Logger.With("wal", opts.Prefix),
		wake:  make(chan struct{}, 1),
		cwake: make(chan struct{}, 1),
		done:  make(chan struct{}),
		cdone: make(chan struct{}),
		gone:  map[uint64]struct{}{},
	}
	rec, err := w.recover(ctx)
	if err != nil {
		return nil, Recovery{}, err
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	go w.run()
	go w.cursorLoop()
	return w, rec, nil
}

func (w *WAL) segKey(first, count uint64) string {
	return fmt.Sprintf("%sseg/%020d-%010d", w.opts.Prefix, first, count)
}

func (w *WAL) cursorKey() string { return w.opts.Prefix + "cursor" }

// parseSegKey reads first and count from a segment key's base name.
func parseSegKey(base string) (first, count uint64, ok bool) {
	a, b, found := strings.Cut(base, "-")
	if !found || len(a) != 20 || len(b) != 10 {
		return 0, 0, false
	}
	first, err1 := strconv.ParseUint(a, 10, 64)
	count, err2 := strconv.ParseUint(b, 10, 64)
	return first, count, err1 == nil && err2 == nil && first > 0 && count > 0
}

// encodeCursor is 8 bytes of cursor and a CRC-32C of them.
func encodeCursor(c uint64) []byte {
	b := binary.LittleEndian.AppendUint64(nil, c)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeCursor(b []byte) (uint64, bool) {
	if len(b) != 12 || crc32.Checksum(b[:8], castagnoli) != binary.LittleEndian.Uint32(b[8:]) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b), true
}

func (w *WAL) recover(ctx context.Context) (Recovery, error) {
	rec := Recovery{Cursor: 1}
	data, err := w.b.ReadAll(ctx, w.cursorKey())
	switch {
	case gcerrors.Code(err) == gcerrors.NotFound:
	case err != nil:
		return rec, fmt.Errorf("%w: read cursor: %w", ErrOpen, err)
	default:
		if c, ok := decodeCursor(data); ok && c > 0 {
			rec.Cursor = c
		} else {
			w.log.Warn("WAL cursor object is damaged; every stored entry is replayed", "key", w.cursorKey())
		}
	}
	var all []segInfo
	it := w.b.List(&blob.ListOptions{Prefix: w.opts.Prefix + "seg/"})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return rec, fmt.Errorf("%w: list segments: %w", ErrOpen, err)
		}
		first, count, ok := parseSegKey(strings.TrimPrefix(obj.Key, w.opts.Prefix+"seg/"))
		if !ok {
			w.log.Warn("ignoring an object that is not a WAL segment", "key", obj.Key)
			continue
		}
		all = append(all, segInfo{first: first, count: count, key: obj.Key})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].first < all[j].first })
	w.low = rec.Cursor
	w.written = rec.Cursor
	w.next = rec.Cursor
	covered := w.low // entries below are accounted for (stored live, or done)
	for _, s := range all {
		w.next = max(w.next, s.end())
		if s.end() <= rec.Cursor {
			w.remove(ctx, s) // wholly acknowledged; left by a crash before its delete
			continue
		}
		data, err := w.b.ReadAll(ctx, s.key)
		if err != nil {
			return rec, fmt.Errorf("%w: read %s: %w", ErrOpen, s.key, err)
		}
		seg, err := DecodeSegment(data)
		if err == nil && (seg.First != s.first || uint64(len(seg.Entries)) != s.count) {
			err = fmt.Errorf("%w: holds %d entries from %d, its name says %d from %d", ErrCorruptSegment, len(seg.Entries), seg.First, s.count, s.first)
		}
		for seq := covered; seq < s.first; seq++ {
			w.gone[seq] = struct{}{} // a gap: a failed PUT
		}
		covered = max(covered, s.end())
		if err != nil {
			w.log.Error("WAL segment is damaged; its entries are lost", "key", s.key, "err", err)
			rec.CorruptSegments++
			rec.CorruptKeys = append(rec.CorruptKeys, s.key)
			for seq := max(s.first, w.low); seq < s.end(); seq++ {
				w.gone[seq] = struct{}{}
			}
			w.segs = append(w.segs, s) // deleted once the cursor passes it
			continue
		}
		w.segs = append(w.segs, s)
		w.replay = append(w.replay, s)
		rec.Segments++
		for i, e := range seg.Entries {
			if s.first+uint64(i) >= rec.Cursor {
				rec.Pending++
				rec.PendingBytes += int64(len(e))
			}
		}
	}
	w.replayLo = rec.Cursor
	w.npending = uint64(rec.Pending)
	w.advance()
	return rec, nil
}

// advance moves low past done entries. w.mu is held (or Open runs).
func (w *WAL) advance() {
	for {
		if _, ok := w.gone[w.low]; !ok || w.low >= w.next {
			return
		}
		delete(w.gone, w.low)
		w.low++
	}
}

// AppendAsync appends data and returns at once with its sequence number and
// a channel that yields one value: nil once the PUT of the segment holding
// it succeeded, or the error that prevented it. data may be reused once
// AppendAsync returns.
func (w *WAL) AppendAsync(data []byte) (uint64, <-chan error) {
	ch := make(chan error, 1)
	if len(data) > MaxEntryBytes {
		ch <- fmt.Errorf("%w: %d bytes", ErrTooLarge, len(data))
		return 0, ch
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		ch <- ErrClosed
		return 0, ch
	}
	seq := w.next
	w.next++
	w.queue = append(w.queue, pending{seq: seq, data: slices.Clone(data), ch: ch})
	w.appended++
	w.npending++
	w.mu.Unlock()
	signal(w.wake)
	return seq, ch
}

// Append appends data and waits until it is durable or ctx ends.
func (w *WAL) Append(ctx context.Context, data []byte) (uint64, error) {
	seq, ch := w.AppendAsync(data)
	select {
	case err := <-ch:
		return seq, err
	case <-ctx.Done():
		return seq, ctx.Err()
	}
}

// Ack acknowledges entry seq: it is not replayed after a restart once a
// cursor past it is written. Acks may come in any order; acking twice is a
// no-op.
func (w *WAL) Ack(seq uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if seq == 0 || seq >= w.next {
		return fmt.Errorf("%w: %d", ErrUnknownSeq, seq)
	}
	if seq < w.low {
		return nil
	}
	if _, dup := w.gone[seq]; dup {
		return nil
	}
	w.gone[seq] = struct{}{}
	w.acked++
	w.npending--
	w.sinceCur++
	w.advance()
	if w.sinceCur >= w.opts.CursorMaxEntries {
		signal(w.cwake)
	}
	return nil
}

// Replay calls fn, in sequence order, with every entry that was not
// acknowledged when the WAL was opened. Replay stops at fn's first error
// and returns it.
func (w *WAL) Replay(ctx context.Context, fn func(seq uint64, data []byte) error) error {
	w.mu.Lock()
	closed, snap, lo := w.closed, w.replay, w.replayLo
	w.mu.Unlock()
	if closed {
		return ErrClosed
	}
	for _, s := range snap {
		seg, err := w.get(ctx, s)
		if err != nil {
			return fmt.Errorf("objstore: replay: %w", err)
		}
		for i, e := range seg.Entries {
			if seq := s.first + uint64(i); seq >= lo {
				if err := fn(seq, e); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// get reads and decodes a segment.
func (w *WAL) get(ctx context.Context, s segInfo) (Segment, error) {
	data, err := w.b.ReadAll(ctx, s.key)
	if err != nil {
		return Segment{}, fmt.Errorf("read %s: %w", s.key, err)
	}
	seg, err := DecodeSegment(data)
	if err != nil {
		return Segment{}, fmt.Errorf("%s: %w", s.key, err)
	}
	if seg.First != s.first || uint64(len(seg.Entries)) != s.count {
		return Segment{}, fmt.Errorf("%w: %s changed", ErrCorruptSegment, s.key)
	}
	return seg, nil
}

// Read returns the first entry with from <= seq < limit whose PUT
// succeeded (found false: there is none), reading its segment from the
// bucket. It is meant for one reader moving forward: it keeps the last
// segment read.
func (w *WAL) Read(ctx context.Context, from, limit uint64) (seq uint64, data []byte, found bool, err error) {
	w.mu.Lock()
	i := sort.Search(len(w.segs), func(i int) bool { return w.segs[i].end() > from })
	var s segInfo
	if i < len(w.segs) {
		s, seq = w.segs[i], max(from, w.segs[i].first)
	}
	w.mu.Unlock()
	if s.count == 0 || seq >= limit {
		return 0, nil, false, nil
	}
	w.rmu.Lock()
	defer w.rmu.Unlock()
	if w.rcache.key != s.key {
		seg, err := w.get(ctx, s)
		if err != nil {
			return 0, nil, false, fmt.Errorf("objstore: read back: %w", err)
		}
		w.rcache.key, w.rcache.seg = s.key, seg
	}
	return seq, w.rcache.seg.Entries[seq-s.first], true, nil
}

// Stats returns the current counters.
func (w *WAL) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Stats{
		Appended: w.appended, Acked: w.acked, Pending: w.npending,
		Puts: w.nputs, Failed: w.nfailed, Cursor: w.written, Segments: len(w.segs),
	}
}

// Close stores everything appended before it (their channels then yield
// nil, or an error if a PUT fails or ShutdownTimeout passes), writes the
// cursor, deletes the segments below it and closes the bucket. Later
// Appends fail with ErrClosed.
func (w *WAL) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.cdone
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	t := time.AfterFunc(w.opts.ShutdownTimeout, w.cancel)
	defer t.Stop()
	signal(w.wake)
	<-w.done
	signal(w.cwake)
	<-w.cdone
	w.cancel()
	return w.b.Close()
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
