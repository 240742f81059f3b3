package mongodb_test

import (
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/connect/mongodb"

	_ "github.com/flowplane/flowplane/internal/connect/input"
	_ "github.com/flowplane/flowplane/internal/connect/output"
)

func TestExampleBuilds(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindOutput, "mongodb")
	if _, err := mongodb.NewOutput(conf, component.Resources{}); err != nil {
		t.Errorf("example: %v", err)
	}
}

// TestOutputConfig: the constructor accepts ArkFlow's shape and our
// extensions, and names the field of each problem without quoting a
// password.
func TestOutputConfig(t *testing.T) {
	base := func(kv ...any) map[string]any {
		m := map[string]any{"uri": "mongodb://127.0.0.1:27017", "database": "arkflow", "collection": "events"}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
				continue
			}
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name string
		conf map[string]any
		err  string // "" for a good configuration
	}{
		{"arkflow shape", base(), ""},
		{"credentials and options", base("uri", "mongodb://app:s3cret@db1:27017,db2:27018/admin?replicaSet=rs0&w=majority"), ""},
		{"escaped password", base("uri", "mongodb://app:s3cret%2Fx%40y@127.0.0.1/?authSource=admin"), ""},
		{"srv", base("uri", "mongodb+srv://app:s3cret@cluster0.example.net/"), ""},
		{"ipv6", base("uri", "mongodb://[::1]:27017"), ""},
		{"upsert", base("mode", "upsert", "key_fields", []any{"id", "user.id"}), ""},
		{"acknowledged", base("write_concern", "acknowledged", "server_selection_timeout", "250ms", "timeout", "1m"), ""},
		{"insert explicit", base("mode", "insert"), ""},
		{"no uri", base("uri", nil), "uri: required"},
		{"http uri", base("uri", "http://app:s3cret@h:1"), "uri: not a MongoDB connection string"},
		{"no host", base("uri", "mongodb://app:s3cret@/db"), "uri: not a MongoDB connection string"},
		{"slash in password", base("uri", "mongodb://app:s3/cret@h"), "uri: not a MongoDB connection string"},
		{"two at signs", base("uri", "mongodb://app:s3cret@x@h"), "uri: not a MongoDB connection string"},
		{"bad option quoting the password", base("uri", "mongodb://app:s3cret@h/?maxPoolSize=s3cret"), `invalid value for "maxPoolSize": "xxxxx"`},
		{"bad option value", base("uri", "mongodb://app:s3cret@h/?connectTimeoutMS=soon"), `uri: error parsing uri: invalid value for "connectTimeoutMS"`},
		{"no database", base("database", nil), "database: required"},
		{"bad database", base("database", "a.b"), `database: "a.b" holds a character`},
		{"no collection", base("collection", ""), "collection: required"},
		{"bad collection", base("collection", "$cmd"), `collection: "$cmd" holds a character`},
		{"bad mode", base("mode", "replace"), `mode: must be insert or upsert, got "replace"`},
		{"upsert without keys", base("mode", "upsert"), "key_fields: at least one is required with mode upsert"},
		{"keys with insert", base("key_fields", []any{"id"}), "key_fields: only with mode upsert"},
		{"operator key", base("mode", "upsert", "key_fields", []any{"id", "$where"}), `key_fields[1]: "$where" is not a field name`},
		{"empty path part", base("mode", "upsert", "key_fields", []any{"a..b"}), `key_fields[0]: "a..b"`},
		{"bad concern", base("write_concern", "w0"), `write_concern: must be majority or acknowledged, got "w0"`},
		{"selection", base("server_selection_timeout", "0s"), "server_selection_timeout: must be a positive duration"},
		{"timeout", base("timeout", "soon"), "timeout: must be a positive duration"},
		{"unknown field", base("codec", "json"), "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mongodb.NewOutput(tc.conf, component.Resources{})
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error quotes the password: %v", err)
			}
		})
	}
}

// TestMaterializeNamesThePath: what the schema rejects gets an error
// naming the path of the field, as `flowplane --validate` shows.
func TestMaterializeNamesThePath(t *testing.T) {
	for _, tc := range []struct{ name, output, want string }{
		{"missing collection", `{type: mongodb, uri: "mongodb://127.0.0.1:1", database: d}`, "streams[0].output"},
		{"unknown field", `{type: mongodb, uri: "mongodb://127.0.0.1:1", database: d, collection: c, codec: {type: json}}`, "streams[0].output"},
		{"mode", `{type: mongodb, uri: "mongodb://127.0.0.1:1", database: d, collection: c, mode: replace}`, "streams[0].output.mode"},
		{"key fields type", `{type: mongodb, uri: "mongodb://127.0.0.1:1", database: d, collection: c, mode: upsert, key_fields: id}`, "streams[0].output.key_fields"},
		{"upsert needs keys", `{type: mongodb, uri: "mongodb://127.0.0.1:1", database: d, collection: c, mode: upsert}`, "streams[0].output"},
		{"keys need upsert", `{type: mongodb, uri: "mongodb://127.0.0.1:1", database: d, collection: c, key_fields: [id]}`, "streams[0].output.key_fields"},
		{"timeout", `{type: mongodb, uri: "mongodb://127.0.0.1:1", database: d, collection: c, timeout: 5}`, "streams[0].output.timeout"},
		{"concern", `{type: mongodb, uri: "mongodb://127.0.0.1:1", database: d, collection: c, write_concern: all}`, "streams[0].output.write_concern"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "streams:\n  - id: s\n    input: {type: memory, messages: []}\n    pipeline: {processors: []}\n    output: " + tc.output + "\n"
			_, err := componenttest.Materialize(doc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error quotes the password: %v", err)
			}
		})
	}
}

// TestArkFlowExampleValidates: ArkFlow's example output, unchanged, is a
// valid flowplane output.
func TestArkFlowExampleValidates(t *testing.T) {
	doc := `streams:
  - input: {type: memory, messages: []}
    pipeline: {processors: []}
    output:
      type: "mongodb"
      uri: "mongodb://localhost:27017"
      database: "arkflow"
      collection: "events"
`
	if _, err := componenttest.Materialize(doc); err != nil {
		t.Errorf("ArkFlow's example: %v", err)
	}
}
