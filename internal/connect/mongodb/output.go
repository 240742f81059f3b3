package mongodb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// Modes and write concerns, as spelled in the configuration.
const (
	modeInsert = "insert"
	modeUpsert = "upsert"

	concernMajority     = "majority"
	concernAcknowledged = "acknowledged"
)

func init() {
	component.Default.RegisterOutput(component.Spec{
		Name: "mongodb",
		Summary: "Writes each message, a JSON object, as one document of a MongoDB collection: one ordered " +
			"InsertMany per batch (`mode: insert`), or one ordered bulk write of ReplaceOne upserts matched on " +
			"`key_fields` (`mode: upsert`), which makes a redelivered batch idempotent. Write returns nil only " +
			"when the server acknowledged the whole batch with the configured write concern (majority by " +
			"default). Connect pings the server and fails within `server_selection_timeout` when it is down.",
		Schema: func() map[string]any {
			s := component.ObjectSchema(map[string]any{
				"uri": component.Prop("string", "MongoDB connection string, `mongodb://[user:password@]host[:port]"+
					"[,host...][/authdb][?options]` or `mongodb+srv://`. Only its hosts are ever logged.", nil),
				"database":   component.Prop("string", "Database to write to.", nil),
				"collection": component.Prop("string", "Collection to write to.", nil),
				"mode": component.EnumProp("`insert`: every message is a new document (a redelivered batch "+
					"is inserted again). `upsert`: the document replaces the one with the same `key_fields`, "+
					"or is inserted when there is none (a redelivered batch changes nothing).", modeInsert,
					modeInsert, modeUpsert),
				"key_fields": func() map[string]any {
					p := component.Prop("array", "upsert: fields, dotted paths into nested objects allowed "+
						"(`user.id`), whose values identify a document; each message must have them, not null "+
						"and not an array. Back them with a unique index.", nil)
					p["items"] = map[string]any{"type": "string", "minLength": 1}
					p["minItems"] = 1
					return p
				}(),
				"write_concern": component.EnumProp("When the server acknowledges a write: `majority` (a "+
					"majority of the replica set has it; on a standalone server the same as acknowledged) or "+
					"`acknowledged` (the primary has it, w:1).", concernMajority, concernMajority, concernAcknowledged),
				"server_selection_timeout": component.DurationProp("Longest Connect, and each write, waits "+
					"for a server: one that is down fails Connect within it, and the runtime retries.", "5s"),
				"timeout": component.DurationProp("Longest one Write waits for the server to acknowledge its "+
					"batch before failing it (the runtime then retries it).", "30s"),
			}, "uri", "database", "collection")
			s["if"] = map[string]any{"properties": map[string]any{"mode": map[string]any{"const": modeUpsert}},
				"required": []any{"mode"}}
			s["then"] = map[string]any{"required": []any{"key_fields"}}
			s["else"] = map[string]any{"properties": map[string]any{"key_fields": false}}
			return s
		}(),
		Example: `type: mongodb
uri: mongodb://127.0.0.1:27017
database: arkflow
collection: events
mode: upsert
key_fields: [id]
write_concern: majority
server_selection_timeout: 5s
timeout: 30s
`,
	}, NewOutput)
}

var _ component.Output = (*Output)(nil)

// OutputConfig is the configuration of the mongodb output. URI, Database
// and Collection are ArkFlow's fields; the rest are flowplane's.
type OutputConfig struct {
	URI                    string   `json:"uri"`
	Database               string   `json:"database"`
	Collection             string   `json:"collection"`
	Mode                   string   `json:"mode"`
	KeyFields              []string `json:"key_fields"`
	WriteConcern           string   `json:"write_concern"`
	ServerSelectionTimeout string   `json:"server_selection_timeout"`
	Timeout                string   `json:"timeout"`
}

// DefaultOutputConfig is the configuration with its defaults.
func DefaultOutputConfig() OutputConfig {
	return OutputConfig{Mode: modeInsert, WriteConcern: concernMajority, ServerSelectionTimeout: "5s", Timeout: "30s"}
}

// Output writes batches to a MongoDB collection.
type Output struct {
	uri        string
	redacted   string // scheme and hosts only, for logs and errors
	scrub      scrubber
	database   string
	collection string
	keys       []string // nil: insert mode
	concern    *writeconcern.WriteConcern
	selection  time.Duration
	timeout    time.Duration
	log        *slog.Logger
	net        sandbox.Net // servers are dialled through it

	// Owned by Connect, Write and Close (one goroutine at a time).
	client *mongo.Client
	coll   *mongo.Collection
}

// NewOutput builds a mongodb output from its configuration. It does not
// touch the network: Connect does.
func NewOutput(conf map[string]any, res component.Resources) (component.Output, error) {
	c := DefaultOutputConfig()
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	if res.Logger == nil {
		res.Logger = slog.New(slog.DiscardHandler)
	}
	o := &Output{uri: c.URI, scrub: scrubber{secrets: secrets(c.URI)}, database: c.Database,
		collection: c.Collection, log: res.Logger, net: res.Net}
	var errs []error
	switch {
	case c.URI == "":
		errs = append(errs, errors.New("uri: required, e.g. mongodb://127.0.0.1:27017"))
	default:
		r, err := redactURI(c.URI)
		if err != nil {
			errs = append(errs, err)
			break
		}
		o.redacted = r
		// A mongodb+srv URI is resolved through DNS when parsed, which is
		// Connect's business; a plain one is checked here, options included.
		if strings.HasPrefix(c.URI, "mongodb://") {
			if _, err := connstring.ParseAndValidate(c.URI); err != nil {
				errs = append(errs, fmt.Errorf("uri: %w", o.scrub.wrap(err)))
			}
		}
	}
	if err := checkName("database", c.Database, `/\. "$`); err != nil {
		errs = append(errs, err)
	}
	if err := checkName("collection", c.Collection, "$"); err != nil {
		errs = append(errs, err)
	}
	switch c.Mode {
	case modeInsert:
		if len(c.KeyFields) > 0 {
			errs = append(errs, errors.New("key_fields: only with mode upsert"))
		}
	case modeUpsert:
		if len(c.KeyFields) == 0 {
			errs = append(errs, errors.New("key_fields: at least one is required with mode upsert"))
		}
		for i, k := range c.KeyFields {
			if k == "" || strings.HasPrefix(k, "$") || strings.HasPrefix(k, ".") || strings.HasSuffix(k, ".") ||
				strings.Contains(k, "..") {
				errs = append(errs, fmt.Errorf("key_fields[%d]: %q is not a field name or dotted path", i, k))
			}
		}
		o.keys = c.KeyFields
	default:
		errs = append(errs, fmt.Errorf("mode: must be insert or upsert, got %q", c.Mode))
	}
	switch c.WriteConcern {
	case concernMajority:
		o.concern = writeconcern.Majority()
	case concernAcknowledged:
		o.concern = writeconcern.W1()
	default:
		errs = append(errs, fmt.Errorf("write_concern: must be majority or acknowledged, got %q", c.WriteConcern))
	}
	var err error
	if o.selection, err = parsePositive("server_selection_timeout", c.ServerSelectionTimeout); err != nil {
		errs = append(errs, err)
	}
	if o.timeout, err = parsePositive("timeout", c.Timeout); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return o, nil
}

// checkName rejects an empty name or one with characters MongoDB forbids
// in it.
func checkName(field, name, forbidden string) error {
	if name == "" {
		return fmt.Errorf("%s: required", field)
	}
	if strings.ContainsAny(name, forbidden) || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("%s: %q holds a character MongoDB does not allow in it (one of %q or NUL)", field, name, forbidden)
	}
	return nil
}

func parsePositive(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: must be a positive duration such as 5s, got %q", field, s)
	}
	return d, nil
}

// Connect creates the client and pings the primary. A server that is down
// fails it within server_selection_timeout; it may be called again after
// a failure.
func (o *Output) Connect(ctx context.Context) error {
	o.release(ctx)
	opts := options.Client().ApplyURI(o.uri).
		SetServerSelectionTimeout(o.selection).
		SetConnectTimeout(o.selection).
		SetAppName("flowplane")
	if o.net.Restricted() {
		// Every server, those an SRV record or the replica set names
		// included, is dialled through the Hub work's network.
		opts.SetDialer(o.net.Dial(&net.Dialer{Timeout: o.selection}))
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return fmt.Errorf("mongodb: client for %s: %w", o.redacted, o.scrub.wrap(err))
	}
	pctx, cancel := context.WithTimeout(ctx, o.selection+5*time.Second)
	defer cancel()
	if err := client.Ping(pctx, readpref.Primary()); err != nil {
		o.disconnect(ctx, client)
		return fmt.Errorf("mongodb: ping %s: %w", o.redacted, o.scrub.wrap(err))
	}
	o.client = client
	o.coll = client.Database(o.database).Collection(o.collection,
		options.Collection().SetWriteConcern(o.concern))
	o.log.Info("mongodb output connected", "servers", o.redacted, "database", o.database,
		"collection", o.collection, "upsert", o.keys != nil)
	return nil
}

// Write converts every message of b into a document, then writes them in
// one ordered operation. It returns nil only when the server acknowledged
// every document with the configured write concern. A message that is not
// a JSON object, or lacks a key field, fails the whole batch before
// anything is sent, with an error naming its index.
func (o *Output) Write(ctx context.Context, b message.Batch) error {
	if o.coll == nil {
		return errors.New("mongodb: output is not connected")
	}
	if b.Len() == 0 {
		return ctx.Err()
	}
	docs, err := documents(b)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if o.keys == nil {
		return o.insert(ctx, docs)
	}
	models, err := upsertModels(docs, o.keys)
	if err != nil {
		return err
	}
	return o.upsert(ctx, models)
}

// documents converts the messages of b.
func documents(b message.Batch) ([]any, error) {
	docs := make([]any, b.Len())
	for i := range b.Messages {
		p, err := b.Messages[i].Payload()
		if err != nil {
			return nil, fmt.Errorf("mongodb: message %d: %w", i, err)
		}
		d, err := toDocument(p)
		if err != nil {
			return nil, fmt.Errorf("mongodb: message %d: %w", i, err)
		}
		docs[i] = d
	}
	return docs, nil
}

// upsertModels builds one ReplaceOne upsert per document.
func upsertModels(docs []any, keys []string) ([]mongo.WriteModel, error) {
	models := make([]mongo.WriteModel, len(docs))
	for i, d := range docs {
		m, err := upsertModel(d.(bson.D), keys)
		if err != nil {
			return nil, fmt.Errorf("mongodb: message %d: %w", i, err)
		}
		models[i] = m
	}
	return models, nil
}

func (o *Output) insert(ctx context.Context, docs []any) error {
	res, err := o.coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(true))
	if err != nil {
		return o.writeErr("insert", len(docs), err)
	}
	if !res.Acknowledged || len(res.InsertedIDs) != len(docs) {
		return fmt.Errorf("mongodb: insert: the server acknowledged %d of %d documents", len(res.InsertedIDs), len(docs))
	}
	return nil
}

func (o *Output) upsert(ctx context.Context, models []mongo.WriteModel) error {
	res, err := o.coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(true))
	if err != nil {
		return o.writeErr("upsert", len(models), err)
	}
	if done := res.MatchedCount + res.UpsertedCount; !res.Acknowledged || done != int64(len(models)) {
		return fmt.Errorf("mongodb: upsert: the server acknowledged %d of %d documents", done, len(models))
	}
	return nil
}

func (o *Output) writeErr(op string, n int, err error) error {
	return fmt.Errorf("mongodb: %s of %d documents into %s.%s on %s: %w",
		op, n, o.database, o.collection, o.redacted, o.scrub.wrap(err))
}

func (o *Output) release(ctx context.Context) {
	if o.client != nil {
		o.disconnect(ctx, o.client)
		o.client, o.coll = nil, nil
	}
}

// disconnect closes a client, bounded in time: Write already waited for
// every acknowledgement, so nothing is pending.
func (o *Output) disconnect(ctx context.Context, c *mongo.Client) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.Disconnect(ctx); err != nil {
		o.log.Warn("mongodb disconnect", "servers", o.redacted, "error", o.scrub.wrap(err))
	}
}

// Close disconnects the client.
func (o *Output) Close(ctx context.Context) error {
	o.release(ctx)
	return nil
}
