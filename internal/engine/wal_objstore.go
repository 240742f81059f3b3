package engine

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"time"

	"gocloud.dev/blob"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/state"
	"github.com/flowplane/flowplane/internal/stream"
	"github.com/flowplane/flowplane/internal/wal"
	"github.com/flowplane/flowplane/internal/wal/objstore"
)

// stoppableWAL is a stream's WAL, local or in an object store.
type stoppableWAL interface {
	stream.WAL
	Close() error
}

// objectWAL adapts the object-store WAL to the stream runtime's batch hook.
type objectWAL struct {
	w           *objstore.WAL
	replayBytes int64
	// depth is the stream's WALAppendDepth: enough appends in flight to
	// fill every PUT worker's segment, since a PUT takes far longer than
	// an fsync.
	depth int
	// release lets go of a confined file:// bucket's pinned directory.
	release func() error
}

// maxAppendDepth bounds the appends a stream keeps in flight to an
// object-store WAL.
const maxAppendDepth = 1024

var _ stoppableWAL = (*objectWAL)(nil)

func (s *objectWAL) Append(b message.Batch) (uint64, int64, <-chan error) {
	return appendBatch(s.w, b)
}

func (s *objectWAL) Ack(seq uint64) error { return s.w.Ack(seq) }

func (s *objectWAL) ReplayBytes() int64 { return s.replayBytes }

func (s *objectWAL) Replay(ctx context.Context, fn func(seq uint64, b message.Batch, size int64) error) error {
	return s.w.Replay(ctx, func(seq uint64, data []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := wal.DecodeBatch(data)
		if err != nil {
			return err
		}
		return fn(seq, b, int64(len(data)))
	})
}

func (s *objectWAL) Read(ctx context.Context, from, limit uint64) (uint64, message.Batch, int64, bool, error) {
	seq, data, ok, err := s.w.Read(ctx, from, limit)
	if err != nil || !ok {
		return 0, message.Batch{}, 0, false, err
	}
	b, err := wal.DecodeBatch(data)
	if err != nil {
		return 0, message.Batch{}, 0, false, err
	}
	return seq, b, int64(len(data)), true, nil
}

// Close closes the WAL, then lets go of what the bucket's open held.
func (s *objectWAL) Close() error {
	err := s.w.Close()
	if s.release != nil {
		err = errors.Join(err, s.release())
	}
	return err
}

// openTimeout bounds opening and recovering an object-store WAL.
const openTimeout = 60 * time.Second

// objectWALFor opens the object-store WAL a validated durability.backend
// describes.
func objectWALFor(b *config.WALBackend, res component.Resources) (*objectWAL, error) {
	opts, err := objectWALOptions(b)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	var bk *blob.Bucket
	release := func() error { return nil }
	if u, perr := url.Parse(b.URL); b.URL != "" && perr == nil && u.Scheme == "file" && res.FS.Confined() {
		// The Hub's work: the bucket's directory through the FS, pinned
		// while the WAL is open.
		bk, release, err = state.OpenBucketIn(ctx, u, true, res.FS)
	} else if b.URL != "" {
		bk, err = objstore.OpenURL(ctx, b.URL)
	} else {
		bk, err = objstore.OpenS3(ctx, objstore.S3{
			Bucket: b.S3.Bucket, Region: b.S3.Region, Endpoint: b.S3.Endpoint,
			AccessKeyID: b.S3.AccessKeyID, SecretAccessKey: b.S3.SecretAccessKey,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	opts.Bucket = bk
	opts.Logger = res.Logger
	w, rec, err := objstore.Open(ctx, opts)
	if err != nil {
		_ = bk.Close()
		_ = release()
		return nil, fmt.Errorf("backend: %w", err)
	}
	if rec.CorruptSegments > 0 {
		res.Logger.Error("WAL segments damaged; their entries are lost", "segments", rec.CorruptSegments, "keys", rec.CorruptKeys)
	}
	if rec.Pending > 0 {
		res.Logger.Info("WAL replays unacknowledged batches", "pending", rec.Pending, "cursor", rec.Cursor)
	}
	depth := min(max(opts.MaxEntries*max(opts.Workers, 1), 4), maxAppendDepth)
	return &objectWAL{w: w, replayBytes: rec.PendingBytes, depth: depth, release: release}, nil
}

// objectWALOptions resolves a backend's settings: segment_tuning (a preset
// with overrides) takes precedence over segment, as in ArkFlow.
func objectWALOptions(b *config.WALBackend) (objstore.Options, error) {
	o := objstore.Options{Prefix: path.Join(b.Prefix, b.NodeID, b.StreamID) + "/"}
	o.MaxEntries, o.MaxBytes, _ = objstore.Preset("balanced")
	if s := b.Segment; s != nil {
		o.MaxEntries = cmpOr(s.MaxEntries, o.MaxEntries)
		o.MaxBytes = cmpOr(s.MaxBytes, o.MaxBytes)
	}
	if t := b.SegmentTuning; t != nil {
		e, n, ok := objstore.Preset(t.Strategy)
		if !ok {
			return o, fmt.Errorf("backend.segment_tuning.strategy: unknown %q", t.Strategy)
		}
		o.MaxEntries, o.MaxBytes = cmpOr(t.MaxEntries, e), cmpOr(t.MaxBytes, n)
	}
	if c := b.Cursor; c != nil {
		o.CursorMaxEntries = c.MaxEntries
		if c.Interval != "" {
			d, err := config.ParseWALDuration(c.Interval)
			if err != nil {
				return o, fmt.Errorf("backend.cursor.interval: %w", err)
			}
			o.CursorInterval = d
		}
	}
	if p := b.ParallelPut; p != nil {
		o.Workers = p.Workers
		if p.ShutdownTimeout != "" {
			d, err := config.ParseWALDuration(p.ShutdownTimeout)
			if err != nil {
				return o, fmt.Errorf("backend.parallel_put.shutdown_timeout: %w", err)
			}
			o.ShutdownTimeout = d
		}
	}
	if c := b.Compression; c != nil {
		switch c.Type {
		case "none":
		case "gzip":
			o.Compression.Codec = objstore.CodecGzip
		case "zstd":
			o.Compression.Codec = objstore.CodecZstd
		case "lz4":
			o.Compression.Codec = objstore.CodecLZ4
		default:
			return o, fmt.Errorf("backend.compression.type: unknown %q", c.Type)
		}
		if c.Level != nil {
			o.Compression.Level = *c.Level
		}
	}
	return o, nil
}

func cmpOr[T int | int64](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}
