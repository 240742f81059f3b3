package sqldb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/goccy/go-json"
	"gocloud.dev/blob"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/sqlengine"
	"github.com/flowplane/flowplane/internal/wal/objstore"
)

// ObjectStoreConfig is input_type.object_store: the S3 or S3-compatible
// store a json file is read from, in ArkFlow's shape.
type ObjectStoreConfig struct {
	Type            string `json:"type"`
	Endpoint        string `json:"endpoint"`
	Region          string `json:"region"`
	BucketName      string `json:"bucket_name"`
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	AllowHTTP       bool   `json:"allow_http"`
}

func objectStoreSchema() map[string]any {
	p := component.ObjectSchema(map[string]any{
		"type":              component.EnumProp("The store: s3 (AWS or S3-compatible).", "s3", "s3"),
		"endpoint":          component.Prop("string", "S3-compatible endpoint URL; requests then use path-style addressing.", nil),
		"region":            component.Prop("string", "Region.", "us-east-1"),
		"bucket_name":       component.Prop("string", "Bucket; must match the bucket of an s3:// path.", nil),
		"access_key_id":     component.Prop("string", "Access key, with secret_access_key; absent: the AWS SDK's default credential chain.", nil),
		"secret_access_key": component.Prop("string", "Secret key (never logged nor shown in errors); use ${secret:NAME}.", nil),
		"allow_http":        component.Prop("boolean", "Allow an http:// endpoint.", false),
	}, "bucket_name")
	p["description"] = "Where an s3:// path is read from (json only)."
	return p
}

// fileInput runs select_sql once over a JSON file, local or in an object
// store, and hands out the result in batches of batch_size rows (tables),
// then ends. A failed batch is handed out again; nothing upstream needs
// acknowledging, so a restarted stream reads the file again.
type fileInput struct {
	query     string
	table     string
	path      string     // local path, or the key within bucket
	fs        sandbox.FS // a local path is read through it
	open      func(ctx context.Context) (*blob.Bucket, error)
	batchSize int
	engine    *sqlengine.Engine
	log       *slog.Logger

	result arrow.RecordBatch // set by Connect
	next   int64             // first row not yet handed out; owned by Read's goroutine
	wake   chan struct{}     // buffered(1): an acknowledgement arrived

	mu      sync.Mutex // guards redo and unacked
	redo    []arrow.RecordBatch
	unacked int // batches handed out and not yet acknowledged
}

func newFileInput(c InputConfig, res component.Resources) (component.Input, error) {
	var errs []error
	if strings.TrimSpace(c.SelectSQL) == "" {
		errs = append(errs, errors.New("select_sql: required"))
	}
	if c.Cursor != nil {
		errs = append(errs, errors.New("cursor: not used by json (the file is read once)"))
	}
	if c.Interval != "0s" && c.Interval != "" {
		errs = append(errs, errors.New("interval: not used by json (the file is read once)"))
	}
	if c.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("batch_size: must be at least 1, got %d", c.BatchSize))
	}
	t := c.InputType
	if t.URI != "" || t.SSL != nil {
		errs = append(errs, errors.New("input_type: uri and ssl are for databases; json takes path (and object_store)"))
	}
	in := &fileInput{query: c.SelectSQL, table: t.Name, batchSize: c.BatchSize, log: res.Logger, fs: res.FS, wake: make(chan struct{}, 1)}
	if in.table == "" {
		in.table = "flow"
	}
	if in.log == nil {
		in.log = slog.New(slog.DiscardHandler)
	}
	if err := in.where(t); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		eng, err := sqlengine.New()
		if err != nil {
			return nil, err
		}
		if err := eng.Check(c.SelectSQL); err != nil {
			errs = append(errs, fmt.Errorf("select_sql: %w", err))
		}
		in.engine = eng
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return in, nil
}

// where decides how the file is opened from path and object_store.
func (in *fileInput) where(t DBConfig) error {
	if t.Path == "" {
		return errors.New("input_type.path: required for json")
	}
	u, err := url.Parse(t.Path)
	scheme := ""
	if err == nil {
		scheme = u.Scheme
	}
	switch scheme {
	case "s3":
		st := t.ObjectStore
		if st == nil {
			return errors.New("input_type.object_store: required for an s3:// path")
		}
		if st.Type != "" && st.Type != "s3" {
			return fmt.Errorf("input_type.object_store.type: %q is not s3", st.Type)
		}
		if st.BucketName != u.Host {
			return fmt.Errorf("input_type.object_store.bucket_name: %q is not the bucket of path (%q)", st.BucketName, u.Host)
		}
		if (st.AccessKeyID == "") != (st.SecretAccessKey == "") {
			return errors.New("input_type.object_store: access_key_id and secret_access_key go together")
		}
		if strings.HasPrefix(st.Endpoint, "http://") && !st.AllowHTTP {
			return errors.New("input_type.object_store.endpoint: an http:// endpoint needs allow_http: true")
		}
		in.path = strings.TrimPrefix(u.Path, "/")
		cfg := objstore.S3{Bucket: st.BucketName, Region: st.Region, Endpoint: st.Endpoint,
			AccessKeyID: st.AccessKeyID, SecretAccessKey: st.SecretAccessKey}
		in.open = func(ctx context.Context) (*blob.Bucket, error) { return objstore.OpenS3(ctx, cfg) }
	case "", "file":
		if t.ObjectStore != nil {
			return errors.New("input_type.object_store: only with an s3:// path")
		}
		in.path = t.Path
		if scheme == "file" {
			in.path = u.Path
		}
	default:
		return fmt.Errorf("input_type.path: scheme %q is not supported (a local path, file:// or s3://)", scheme)
	}
	return nil
}

// Connect reads the file and runs the query. It may be called again after
// it failed (the store was down).
func (in *fileInput) Connect(ctx context.Context) error {
	if in.result != nil {
		return nil
	}
	data, err := in.read(ctx)
	if err != nil {
		return fmt.Errorf("sql input: %w", err)
	}
	payloads, err := jsonRecords(data)
	if err != nil {
		return component.Permanent(fmt.Errorf("sql input: %s: %w", in.path, err))
	}
	rec, err := columnar.FromJSON(payloads, nil)
	if err != nil {
		return component.Permanent(fmt.Errorf("sql input: %s: %w", in.path, err))
	}
	out, err := in.engine.Query(ctx, in.query, map[string]arrow.RecordBatch{in.table: rec})
	if err != nil {
		return component.Permanent(fmt.Errorf("sql input: select_sql: %w", err))
	}
	in.result = out
	in.log.Info("sql input: file queried", "path", in.path, "records", len(payloads), "rows", out.NumRows())
	return nil
}

func (in *fileInput) read(ctx context.Context) ([]byte, error) {
	if in.open == nil {
		b, err := in.fs.ReadFile(in.path)
		if err != nil {
			return nil, component.Permanent(err)
		}
		return b, nil
	}
	bucket, err := in.open(ctx)
	if err != nil {
		return nil, err
	}
	defer bucket.Close()
	r, err := bucket.NewReader(ctx, in.path, nil)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// jsonRecords splits a JSON file into one document per record: the
// elements of a top-level array, or the non-empty lines.
func jsonRecords(data []byte) ([][]byte, error) {
	t := bytes.TrimSpace(data)
	if len(t) > 0 && t[0] == '[' {
		var raw []json.RawMessage
		if err := json.Unmarshal(t, &raw); err != nil {
			return nil, fmt.Errorf("not a JSON array of objects: %w", err)
		}
		out := make([][]byte, len(raw))
		for i := range raw {
			out[i] = raw[i]
		}
		return out, nil
	}
	var out [][]byte
	for line := range bytes.Lines(t) {
		if l := bytes.TrimSpace(line); len(l) > 0 {
			out = append(out, l)
		}
	}
	return out, nil
}

// Read hands out a failed batch again, else the next slice of the result;
// once every slice was handed out and acknowledged, the input ends.
func (in *fileInput) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if in.result == nil {
		return message.Batch{}, nil, errors.New("sql input: not connected")
	}
	for {
		if err := ctx.Err(); err != nil {
			return message.Batch{}, nil, err
		}
		in.mu.Lock()
		if len(in.redo) > 0 {
			rec := in.redo[0]
			in.redo = in.redo[1:]
			in.mu.Unlock()
			return message.Batch{Table: rec}, in.ack(rec), nil
		}
		if n := in.result.NumRows(); in.next < n {
			end := min(in.next+int64(in.batchSize), n)
			rec := in.result.NewSlice(in.next, end)
			in.next = end
			in.unacked++
			in.mu.Unlock()
			return message.Batch{Table: rec}, in.ack(rec), nil
		}
		done := in.unacked == 0
		in.mu.Unlock()
		if done {
			return message.Batch{}, nil, message.ErrEndOfInput
		}
		select {
		case <-in.wake:
		case <-ctx.Done():
			return message.Batch{}, nil, ctx.Err()
		}
	}
}

// ack records a batch's fate: a failed batch is handed out again.
func (in *fileInput) ack(rec arrow.RecordBatch) message.AckFunc {
	return func(_ context.Context, err error) error {
		in.mu.Lock()
		if err != nil {
			in.redo = append(in.redo, rec)
		} else {
			in.unacked--
		}
		in.mu.Unlock()
		select {
		case in.wake <- struct{}{}:
		default:
		}
		return nil
	}
}

// Close releases the engine.
func (in *fileInput) Close(context.Context) error {
	if in.engine != nil {
		return in.engine.Close()
	}
	return nil
}
