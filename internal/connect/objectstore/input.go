package objectstore

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterInput(component.Spec{
		Name: "object_store",
		Summary: "Reads the objects under `prefix` of a bucket (`file://<dir>`, `s3://<bucket>/<prefix>` or an " +
			"S3-compatible server via `?endpoint=...&use_path_style=true&region=...`; credentials from the " +
			"standard AWS environment variables) in key order, emitting each line (codec lines), each element " +
			"of a JSON array (json_array) or the whole object (whole) as a message; keys ending in `.gz` are " +
			"gunzipped. A batch holds records of one object. Without `poll_interval` it lists once and ends " +
			"after the last object; with it, it lists again every interval and reads the keys it has not seen " +
			"(kept in memory). An object is done once every batch of it was acknowledged; then, with " +
			"`delete_after_read`, it is deleted. A failed acknowledgement redelivers the batch; a read that " +
			"fails mid-object (server gone) resumes at the next record. Keys under `_pending/` (uncommitted objects of " +
			"a job's object_store output) are skipped. Metadata: Source and the field " +
			"`object_key` are the key, Offset the record's index in the object. In a job it resumes from its " +
			"checkpointed position (key and record).",
		Schema: component.ObjectSchema(map[string]any{
			"url":    urlProp(),
			"prefix": component.Prop("string", "Read only keys starting with this.", ""),
			"codec": component.EnumProp("How an object becomes messages: one per line, one per element of a JSON array, or one per object.",
				codecLines, codecLines, codecJSONArray, codecWhole),
			"batch_size": func() map[string]any {
				p := component.Prop("integer", "Maximum number of messages per batch.", 100)
				p["minimum"] = 1
				return p
			}(),
			"poll_interval": component.DurationProp("List again this often and read new keys; empty or 0s: list once and end.", ""),
			"delete_after_read": component.Prop("boolean", "Delete an object once all its messages were acknowledged. "+
				"Objects that could not be decoded are kept.", false),
		}, "url"),
		Example: `type: object_store
url: file:///tmp/flowplane-example/objects
prefix: events/
codec: lines
batch_size: 100
poll_interval: 10s
delete_after_read: false
`,
	}, NewInput)
}

var _ component.Replayable = (*Input)(nil)

// InputConfig is the configuration of the object_store input.
type InputConfig struct {
	URL             string `json:"url"`
	Prefix          string `json:"prefix"`
	Codec           string `json:"codec"`
	BatchSize       int    `json:"batch_size"`
	PollInterval    string `json:"poll_interval"`
	DeleteAfterRead bool   `json:"delete_after_read"`
}

// Input reads objects by prefix in key order.
type Input struct {
	url       bucketURL
	release   func() error // with bucket: what its open holds
	prefix    string
	codec     string
	batchSize int
	poll      time.Duration
	delete    bool
	log       *slog.Logger

	// Owned by the goroutine that calls Connect, Read, Position, Seek and
	// Close. bucket is also used (read only) by acknowledgements, which
	// the runtime finishes before Close.
	bucket   *blob.Bucket
	queue    []string        // listed keys not read yet, sorted
	seen     map[string]bool // keys listed ever (queued, read or skipped)
	listed   bool            // listed at least once
	listedAt time.Time
	cur      *object     // being read
	rd       *recordIter // open reader of cur, nil when closed
	resume   *position   // from Seek, applied at the first listing
	lastDone string      // key of the last object read to its end

	wake chan struct{} // buffered(1): a batch waits for redelivery

	mu    sync.Mutex // guards redo, ended and every object's ack counters
	redo  []redoBatch
	ended bool
}

// object is one object being read or waiting for its acknowledgements.
type object struct {
	key  string
	next int64 // records emitted; owned by the Read goroutine
	// off is the byte offset after the records emitted, for an object
	// read as plain lines (0 otherwise): reopening it reads from there.
	off     int64
	corrupt bool // could not be decoded to its end; never deleted

	// Guarded by Input.mu.
	outstanding int  // batches emitted and not yet acknowledged with nil
	readDone    bool // every record was emitted
	finished    bool
}

type redoBatch struct {
	b   message.Batch
	obj *object
}

// NewInput builds an object_store input from its configuration. It only
// parses: Connect opens the bucket.
func NewInput(conf map[string]any, res component.Resources) (component.Input, error) {
	c := InputConfig{Codec: codecLines, BatchSize: 100}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	var errs []error
	u, err := parseBucketURL("url", c.URL)
	errs = append(errs, err)
	switch c.Codec {
	case codecLines, codecJSONArray, codecWhole:
	default:
		errs = append(errs, fmt.Errorf("codec: must be %s, %s or %s, got %q", codecLines, codecJSONArray, codecWhole, c.Codec))
	}
	if c.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("batch_size: must be at least 1, got %d", c.BatchSize))
	}
	var poll time.Duration
	if c.PollInterval != "" {
		poll, err = time.ParseDuration(c.PollInterval)
		if err != nil || poll < 0 {
			errs = append(errs, fmt.Errorf("poll_interval: %q is not a non-negative duration such as \"10s\"", c.PollInterval))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	log := res.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u.fs, u.net = res.FS, res.Net
	return &Input{
		url: u, prefix: c.Prefix, codec: c.Codec, batchSize: c.BatchSize, poll: poll,
		delete: c.DeleteAfterRead, log: log, seen: map[string]bool{}, wake: make(chan struct{}, 1),
	}, nil
}

// Connect opens the bucket and checks that it answers. It may be called
// again after it failed.
func (in *Input) Connect(ctx context.Context) error {
	if in.bucket != nil {
		return nil
	}
	b, release, err := in.url.open(ctx, false)
	if err != nil {
		return fmt.Errorf("object_store input: %w", err)
	}
	in.bucket, in.release = b, release
	in.log.Info("object_store input connected", "url", in.url.shown, "prefix", in.prefix)
	return nil
}

// Read returns the next batch: a redelivered one first, then records of
// the current object, then of the next listed key. Errors of the server
// are returned (the runtime retries Read); reading resumes where it was.
func (in *Input) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if err := ctx.Err(); err != nil {
		return message.Batch{}, nil, err
	}
	if in.bucket == nil {
		return message.Batch{}, nil, errors.New("object_store input: not connected")
	}
	for {
		if r, ok := in.popRedo(); ok {
			return r.b, in.ackFor(r), nil
		}
		if in.cur != nil {
			b, err := in.readBatch(ctx)
			if err != nil {
				in.closeReader()
				return message.Batch{}, nil, fmt.Errorf("object_store input: reading %s: %w", in.cur.key, err)
			}
			if b.Len() > 0 {
				r := redoBatch{b: b, obj: in.cur}
				in.mu.Lock()
				in.cur.outstanding++
				in.mu.Unlock()
				return b, in.ackFor(r), nil
			}
			in.closeReader()
			in.lastDone = in.cur.key
			obj := in.cur
			in.cur = nil
			in.mu.Lock()
			obj.readDone = true
			fin := in.finishLocked(obj)
			in.mu.Unlock()
			if fin {
				in.finish(ctx, obj)
			}
			continue
		}
		if len(in.queue) > 0 {
			in.cur = &object{key: in.queue[0]}
			in.queue = in.queue[1:]
			continue
		}
		if in.listed {
			if in.poll == 0 {
				if in.end() {
					return message.Batch{}, nil, message.ErrEndOfInput
				}
				continue
			}
			if err := in.waitPoll(ctx); err != nil {
				return message.Batch{}, nil, err
			}
			if in.hasRedo() {
				continue
			}
		}
		if err := in.list(ctx); err != nil {
			return message.Batch{}, nil, fmt.Errorf("object_store input: listing %s under %q: %w", in.url.shown, in.prefix, err)
		}
	}
}

// waitPoll waits until the next listing is due or a batch waits for
// redelivery.
func (in *Input) waitPoll(ctx context.Context) error {
	d := time.Until(in.listedAt.Add(in.poll))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	case <-in.wake:
	}
	return nil
}

// list queues the keys under prefix not seen before, sorted.
func (in *Input) list(ctx context.Context) error {
	it := in.bucket.List(&blob.ListOptions{Prefix: in.prefix})
	var keys []string
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if obj.IsDir || in.seen[obj.Key] || strings.HasPrefix(obj.Key, pendingDir) ||
			in.url.u.Scheme == "file" && isFileblobTemp(obj.Key) {
			continue
		}
		keys = append(keys, obj.Key)
	}
	slices.Sort(keys)
	for _, k := range keys {
		in.seen[k] = true
	}
	if r := in.resume; r != nil {
		in.resume = nil
		i, _ := slices.BinarySearch(keys, r.Key)
		if i < len(keys) && keys[i] == r.Key && !r.Done {
			// Continue inside the object.
			in.cur = &object{key: r.Key, next: r.Records, off: r.Bytes}
			i++
		} else if i < len(keys) && keys[i] == r.Key {
			i++
		}
		keys = keys[i:]
	}
	in.queue = append(in.queue, keys...)
	in.listed, in.listedAt = true, time.Now()
	return nil
}

// readBatch reads up to batchSize records of the current object, opening
// it when needed. An empty batch means the object is exhausted. An object
// that cannot be decoded is logged and ended early (marked corrupt).
func (in *Input) readBatch(ctx context.Context) (message.Batch, error) {
	obj := in.cur
	if in.rd == nil {
		rd, err := in.openRecords(ctx, obj)
		if gcerrors.Code(err) == gcerrors.NotFound {
			in.log.Warn("object_store input: object vanished before it was read", "key", obj.key)
			return message.Batch{}, nil
		}
		if err != nil {
			return in.recordErr(obj, err)
		}
		in.rd = rd
		if !rd.ranged {
			for range obj.next { // skip what was emitted before a failure or a restore
				if _, err := rd.next(); err != nil {
					return in.recordErr(obj, err)
				}
			}
		}
	}
	msgs := make([]message.Message, 0, in.batchSize)
	for len(msgs) < in.batchSize {
		rec, err := in.rd.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if len(msgs) > 0 {
				break // hand out what was read; the next Read meets the error again
			}
			return in.recordErr(obj, err)
		}
		m := message.New(rec)
		m.Meta.Source = obj.key
		m.Meta.Offset = obj.next
		m.SetMeta("object_key", obj.key)
		msgs = append(msgs, m)
		obj.next++
		if in.rd.plain {
			obj.off += in.rd.last
		}
	}
	return message.Batch{Messages: msgs}, nil
}

// recordErr ends a corrupt object (an empty batch) and passes any other
// error on, so that the object is opened again at the next record.
func (in *Input) recordErr(obj *object, err error) (message.Batch, error) {
	var ce *corruptError
	if errors.As(err, &ce) {
		in.log.Error("object_store input: object cannot be decoded; skipping the rest of it",
			"key", obj.key, "record", obj.next, "error", ce.err)
		obj.corrupt = true
		return message.Batch{}, nil
	}
	return message.Batch{}, err
}

func (in *Input) closeReader() {
	if in.rd != nil {
		in.rd.close()
		in.rd = nil
	}
}

// ackFor returns the AckFunc of a batch of r.obj: nil counts it
// acknowledged (the object is finished with its last one), an error
// queues the batch for redelivery.
func (in *Input) ackFor(r redoBatch) message.AckFunc {
	r.b = message.Batch{Messages: slices.Clone(r.b.Messages)}
	return func(ctx context.Context, err error) error {
		in.mu.Lock()
		if err != nil {
			if in.ended {
				in.mu.Unlock()
				in.log.Error("object_store input: batch failed after the input ended; it is not redelivered",
					"key", r.obj.key, "messages", r.b.Len(), "error", err)
				return nil
			}
			in.redo = append(in.redo, r)
			in.mu.Unlock()
			in.log.Warn("object_store input: batch failed; redelivering it", "key", r.obj.key, "messages", r.b.Len(), "error", err)
			select {
			case in.wake <- struct{}{}:
			default:
			}
			return nil
		}
		r.obj.outstanding--
		fin := in.finishLocked(r.obj)
		in.mu.Unlock()
		if fin {
			in.finish(ctx, r.obj)
		}
		return nil
	}
}

// finishLocked reports whether obj just became done: read to its end and
// every batch acknowledged.
func (in *Input) finishLocked(obj *object) bool {
	if obj.finished || !obj.readDone || obj.outstanding > 0 {
		return false
	}
	obj.finished = true
	return true
}

// finish deletes a done object when so configured.
func (in *Input) finish(ctx context.Context, obj *object) {
	if !in.delete || obj.corrupt {
		return
	}
	if err := in.bucket.Delete(ctx, obj.key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		in.log.Warn("object_store input: deleting a read object failed; it is read again after a restart",
			"key", obj.key, "error", err)
	}
}

func (in *Input) popRedo() (redoBatch, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.redo) == 0 {
		return redoBatch{}, false
	}
	r := in.redo[0]
	in.redo[0] = redoBatch{}
	in.redo = in.redo[1:]
	return r, true
}

func (in *Input) hasRedo() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.redo) > 0
}

// isFileblobTemp reports whether key is a file:// writer's temporary file,
// <key>.<unix nanoseconds in hex>.tmp, which is renamed to its key when the
// object is complete.
func isFileblobTemp(key string) bool {
	rest, ok := strings.CutSuffix(key, ".tmp")
	if !ok {
		return false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 || len(rest)-i-1 < 8 || len(rest)-i-1 > 16 {
		return false
	}
	for _, c := range rest[i+1:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// end marks the input exhausted when nothing waits for redelivery and
// reports whether it did.
func (in *Input) end() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.redo) > 0 {
		return false
	}
	in.ended = true
	return true
}

// position is the checkpointed position of an object_store input: Key
// is the object being read (Records of it emitted) or, with Done, the last
// one read to its end. Keys are read in order, so every key before Key
// was read.
type position struct {
	Key     string `json:"key"`
	Records int64  `json:"records"`
	// Bytes is the offset after those records in an object read as plain
	// lines, where a restored input starts reading; 0 when unknown.
	Bytes int64 `json:"bytes,omitempty"`
	Done  bool  `json:"done,omitempty"`
}

// Position returns the key and record after the last batch Read returned.
func (in *Input) Position() ([]byte, error) {
	if in.cur != nil {
		return json.Marshal(position{Key: in.cur.key, Records: in.cur.next, Bytes: in.cur.off})
	}
	return json.Marshal(position{Key: in.lastDone, Done: true})
}

// Seek makes the first listing skip the keys before the position's and
// continue inside its object.
func (in *Input) Seek(_ context.Context, pos []byte) error {
	var p position
	if err := json.Unmarshal(pos, &p); err != nil {
		return fmt.Errorf("object_store input: position %s: %w", pos, err)
	}
	if p.Records < 0 || p.Bytes < 0 {
		return fmt.Errorf("object_store input: position %s: records or bytes is negative", pos)
	}
	in.resume = &p
	return nil
}

// Close closes the open object and the bucket.
func (in *Input) Close(context.Context) error {
	in.closeReader()
	if in.bucket == nil {
		return nil
	}
	err := errors.Join(in.bucket.Close(), in.release())
	in.bucket = nil
	if err != nil {
		return fmt.Errorf("object_store input: %w", err)
	}
	return nil
}

// corruptError is a record error that reading the object again cannot
// fix: bad gzip or JSON, or a stream cut short although every byte of
// the object arrived.
type corruptError struct{ err error }

func (e *corruptError) Error() string { return e.err.Error() }
func (e *corruptError) Unwrap() error { return e.err }

// recordIter yields the records of one object.
type recordIter struct {
	body    io.Closer
	raw     *countingReader
	lines   *bufio.Reader // codec lines
	gz      *gzip.Reader
	recs    [][]byte // other codecs: every record, decoded up front
	recsErr error    // other codecs: why the object could not be decoded
	i       int
	size    int64
	plain   bool  // codec lines, not compressed
	ranged  bool  // opened at the offset after the records emitted
	last    int64 // bytes of the last line next returned, newline included
	err     error // the first error of a line read, returned from then on
}

// openRecords opens obj for reading its records.
func (in *Input) openRecords(ctx context.Context, obj *object) (*recordIter, error) {
	zip := strings.HasSuffix(obj.key, gzipSuffix)
	plain := in.codec == codecLines && !zip
	var off int64
	if plain && obj.off > 0 {
		off = obj.off // continue after the records emitted instead of skipping them
	}
	r, err := in.bucket.NewRangeReader(ctx, obj.key, off, -1, nil)
	if err != nil {
		return nil, err
	}
	it := &recordIter{body: r, raw: &countingReader{r: r}, size: r.Size(), plain: plain, ranged: off > 0}
	if in.codec != codecLines {
		data, err := io.ReadAll(it.raw)
		if err != nil {
			it.close()
			return nil, err
		}
		if zip {
			data, err = gunzip(data)
		}
		if err == nil {
			it.recs, err = decodeAll(in.codec, data)
		}
		if err != nil {
			// next yields it, so that it is handled like a bad line.
			it.recs, it.recsErr = nil, &corruptError{err: err}
		}
		return it, nil
	}
	var src io.Reader = it.raw
	if zip {
		gz, err := gzip.NewReader(it.raw)
		if err != nil {
			it.close()
			return nil, it.classify(err)
		}
		it.gz = gz
		src = gz
	}
	it.lines = bufio.NewReaderSize(src, 64<<10)
	return it, nil
}

// next returns the next record, io.EOF after the last, a *corruptError
// when the object cannot be decoded, or the error of the server.
func (it *recordIter) next() ([]byte, error) {
	if it.lines == nil {
		if it.recsErr != nil {
			return nil, it.recsErr
		}
		if it.i >= len(it.recs) {
			return nil, io.EOF
		}
		it.i++
		return it.recs[it.i-1], nil
	}
	if it.err != nil {
		return nil, it.err
	}
	line, err := it.lines.ReadBytes('\n')
	it.last = int64(len(line))
	if errors.Is(err, io.EOF) && len(line) > 0 {
		err = nil // a last line without a newline
	}
	if err != nil {
		if !errors.Is(err, io.EOF) {
			err = it.classify(err)
		}
		it.err = err
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

// classify wraps err in a *corruptError when reading the object again
// would meet it again.
func (it *recordIter) classify(err error) error {
	var flateErr flate.CorruptInputError
	switch {
	case errors.Is(err, gzip.ErrHeader), errors.Is(err, gzip.ErrChecksum), errors.As(err, &flateErr):
		return &corruptError{err: err}
	case errors.Is(err, io.ErrUnexpectedEOF) && it.raw.n >= it.size:
		return &corruptError{err: fmt.Errorf("compressed data cut short: %w", err)}
	}
	return err
}

func (it *recordIter) close() {
	if it.gz != nil {
		_ = it.gz.Close()
	}
	_ = it.body.Close()
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// gunzip decompresses a whole object; its errors are the data's fault.
func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return io.ReadAll(zr)
}
