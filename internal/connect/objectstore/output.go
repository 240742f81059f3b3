package objectstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gocloud.dev/blob"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterOutput(component.Spec{
		Name: "object_store",
		Summary: "Writes each batch as one object to a bucket: `file://<dir>`, `s3://<bucket>/<prefix>` or an " +
			"S3-compatible server (`s3://bucket?endpoint=http://127.0.0.1:9000&use_path_style=true&region=us-east-1`; " +
			"credentials from the standard AWS environment variables). The object key is `path` with " +
			"`{{count}}` (1-based batch number of this output since it started), `{{uuid}}` (random), " +
			"`{{timestamp_unix_nano}}`, `{{timestamp_unix}}`, `{{date}}` (UTC, 2006-01-02) and `{{stream}}` " +
			"(the stream id) replaced. `codec` lines writes each payload followed by a newline; json_array " +
			"writes one JSON array (a payload that is not JSON becomes a JSON string). With `compression: gzip` " +
			"the object is gzip-compressed and its key ends in `.gz` (added when `path` lacks it). At-least-once: " +
			"Write returns only once the object is completely stored; a batch whose upload failed is written " +
			"again under a new key, so a lost answer from the server can leave a duplicate object. In a job it is " +
			"exactly-once by two-phase commit: batches go to `_pending/<operator>-<subtask>/<uuid>` under url and " +
			"are copied to their keys when the checkpoint completes; a restored job commits the checkpoint's " +
			"objects and deletes the other pending ones.",
		Schema: component.ObjectSchema(map[string]any{
			"url": urlProp(),
			"path": func() map[string]any {
				p := component.Prop("string", "Object key template, relative to url. Default "+
					"`{{timestamp_unix_nano}}-{{uuid}}.jsonl` (`.json` with codec json_array), so that keys sort by "+
					"write time and no batch overwrites another.", nil)
				p["pattern"] = pathPattern
				return p
			}(),
			"codec":       component.EnumProp("How a batch becomes an object.", codecLines, codecLines, codecJSONArray),
			"compression": component.EnumProp("Compress objects.", "none", "none", "gzip"),
			"timeout":     component.DurationProp("Longest one upload may take before it fails (and is retried).", "30s"),
		}, "url"),
		Example: `type: object_store
url: file:///tmp/flowplane-example/objects
path: 'events/{{date}}/{{timestamp_unix_nano}}-{{uuid}}.jsonl'
codec: lines
compression: none
`,
	}, NewOutput)
}

var _ component.Transactional = (*Output)(nil)

// OutputConfig is the configuration of the object_store output.
type OutputConfig struct {
	URL         string `json:"url"`
	Path        string `json:"path"`
	Codec       string `json:"codec"`
	Compression string `json:"compression"`
	Timeout     string `json:"timeout"`
}

// Output writes each batch as one object.
type Output struct {
	url     bucketURL
	release func() error // with bucket: what its open holds
	path    pathTemplate
	codec   string
	gzip    bool
	timeout time.Duration
	stream  string
	log     *slog.Logger
	now     func() time.Time

	// Owned by the goroutine that calls Connect, Write and Close.
	bucket *blob.Bucket
	count  int64     // batches written
	txn    *txnState // set by Begin
}

// NewOutput builds an object_store output from its configuration. It only
// parses: Connect opens the bucket.
func NewOutput(conf map[string]any, res component.Resources) (component.Output, error) {
	c := OutputConfig{Codec: codecLines, Compression: "none", Timeout: "30s"}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	var errs []error
	u, err := parseBucketURL("url", c.URL)
	errs = append(errs, err)
	switch c.Codec {
	case codecLines, codecJSONArray:
	default:
		errs = append(errs, fmt.Errorf("codec: must be %s or %s, got %q", codecLines, codecJSONArray, c.Codec))
	}
	if c.Compression != "none" && c.Compression != "gzip" {
		errs = append(errs, fmt.Errorf("compression: must be none or gzip, got %q", c.Compression))
	}
	if c.Path == "" {
		c.Path = "{{timestamp_unix_nano}}-{{uuid}}.jsonl"
		if c.Codec == codecJSONArray {
			c.Path = "{{timestamp_unix_nano}}-{{uuid}}.json"
		}
	}
	zip := c.Compression == "gzip"
	if zip && !strings.HasSuffix(c.Path, gzipSuffix) {
		c.Path += gzipSuffix
	}
	tmpl, err := parsePathTemplate("path", c.Path)
	errs = append(errs, err)
	timeout, err := time.ParseDuration(c.Timeout)
	if err != nil || timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout: %q is not a positive duration such as \"30s\"", c.Timeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	log := res.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u.fs, u.net = res.FS, res.Net
	return &Output{
		url: u, path: tmpl, codec: c.Codec, gzip: zip, timeout: timeout,
		stream: res.StreamID, log: log, now: time.Now,
	}, nil
}

// Connect opens the bucket (creating a file:// directory) and checks that
// it answers. It may be called again after it failed.
func (o *Output) Connect(ctx context.Context) error {
	if o.bucket != nil {
		return nil
	}
	b, release, err := o.url.open(ctx, true)
	if err != nil {
		return fmt.Errorf("object_store output: %w", err)
	}
	o.bucket, o.release = b, release
	o.log.Info("object_store output connected", "url", o.url.shown)
	return nil
}

// Write stores b as one object. It returns nil only after the object was
// completely written and closed, which for S3 means uploaded.
func (o *Output) Write(ctx context.Context, b message.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.Len() == 0 {
		return nil
	}
	if o.bucket == nil {
		return errors.New("object_store output: not connected")
	}
	data, err := encode(o.codec, o.gzip, b)
	if err != nil {
		return fmt.Errorf("object_store output: %w", err)
	}
	key := o.path.render(o.count+1, o.now(), o.stream)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	opts := &blob.WriterOptions{ContentType: "application/x-ndjson"}
	if o.codec == codecJSONArray {
		opts.ContentType = "application/json"
	}
	if o.gzip {
		opts.ContentType = "application/gzip"
	}
	target := key
	if o.txn != nil {
		target = o.txn.pendingKey()
	}
	if err := o.bucket.WriteAll(ctx, target, data, opts); err != nil {
		return fmt.Errorf("object_store output: writing %s to %s: %w", target, o.url.shown, err)
	}
	if o.txn != nil {
		o.txn.written = append(o.txn.written, txnObject{Pending: target, Final: key})
	}
	o.count++
	return nil
}

// Close closes the bucket.
func (o *Output) Close(context.Context) error {
	if o.bucket == nil {
		return nil
	}
	err := errors.Join(o.bucket.Close(), o.release())
	o.bucket = nil
	if err != nil {
		return fmt.Errorf("object_store output: %w", err)
	}
	return nil
}
