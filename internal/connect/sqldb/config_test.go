package sqldb

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/pgtest"
)

// TestExamples: each example satisfies its schema and builds without a
// server.
func TestExamples(t *testing.T) {
	in := componenttest.Example(t, component.Default, component.KindInput, "sql")
	if _, err := component.Default.NewInput("sql", in, component.Resources{}); err != nil {
		t.Errorf("input example: %v", err)
	}
	out := componenttest.Example(t, component.Default, component.KindOutput, "sql")
	if _, err := component.Default.NewOutput("sql", out, component.Resources{}); err != nil {
		t.Errorf("output example: %v", err)
	}
}

const goodPG = `{"type": "postgres", "uri": "postgres://u:hunter2@127.0.0.1:5432/db"}`

// TestBadConfig: what --validate says (schema, then the deep build), each
// problem named by its path.
func TestBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name, input, output string
		path, msg           string
	}{
		{name: "ballista", input: `{"type": "sql", "select_sql": "SELECT 1", "input_type": ` + goodPG + `, "ballista": {"remote_url": "df://x"}}`,
			path: "streams[0].input.ballista", msg: "unknown field"},
		{name: "no select_sql", input: `{"type": "sql", "input_type": ` + goodPG + `}`,
			path: "streams[0].input.select_sql", msg: "required"},
		{name: "unknown database", input: `{"type": "sql", "select_sql": "SELECT 1", "input_type": {"type": "oracle", "uri": "x"}}`,
			path: "streams[0].input.input_type.type", msg: `"oracle" is not one of`},
		{name: "bad interval", input: `{"type": "sql", "select_sql": "SELECT 1", "input_type": ` + goodPG + `, "interval": "5 s"}`,
			path: "streams[0].input.interval", msg: "pattern"},
		{name: "cursor without initial", input: `{"type": "sql", "select_sql": "SELECT 1", "input_type": ` + goodPG + `, "cursor": {"column": "id"}}`,
			path: "streams[0].input.cursor.initial", msg: "required"},
		{name: "duckdb", input: `{"type": "sql", "select_sql": "SELECT 1", "input_type": {"type": "duckdb", "path": "/x.db"}}`,
			path: "streams[0].input", msg: "input_type.type: duckdb is not supported"},
		{name: "sqlite without path", input: `{"type": "sql", "select_sql": "SELECT 1", "input_type": {"type": "sqlite"}}`,
			path: "streams[0].input", msg: "input_type.path: required for sqlite"},
		{name: "postgres without uri", output: `{"type": "sql", "table_name": "t", "output_type": {"type": "postgres"}}`,
			path: "streams[0].output", msg: "output_type.uri: required for postgres"},
		{name: "bad ssl mode", output: `{"type": "sql", "table_name": "t", "output_type": {"type": "postgres", "uri": "postgres://h/db", "ssl": {"ssl_mode": "sometimes"}}}`,
			path: "streams[0].output", msg: "output_type.ssl.ssl_mode"},
		{name: "no table", output: `{"type": "sql", "output_type": ` + goodPG + `}`,
			path: "streams[0].output.table_name", msg: "required"},
		{name: "bad mode", output: `{"type": "sql", "table_name": "t", "output_type": ` + goodPG + `, "mode": "merge"}`,
			path: "streams[0].output.mode", msg: `"merge" is not one of`},
		{name: "upsert without keys", output: `{"type": "sql", "table_name": "t", "output_type": ` + goodPG + `, "mode": "upsert"}`,
			path: "streams[0].output", msg: "key_columns: required for mode upsert"},
		{name: "key not a column", output: `{"type": "sql", "table_name": "t", "output_type": ` + goodPG + `, "mode": "upsert", "columns": ["a"], "key_columns": ["id"]}`,
			path: "streams[0].output", msg: `key_columns: "id" is not one of columns`},
		{name: "keys in insert mode", output: `{"type": "sql", "table_name": "t", "output_type": ` + goodPG + `, "key_columns": ["id"]}`,
			path: "streams[0].output", msg: "key_columns: only for mode upsert"},
		{name: "bad mysql uri", output: `{"type": "sql", "table_name": "t", "output_type": {"type": "mysql", "uri": "mysql://u:hunter2@/db"}}`,
			path: "streams[0].output", msg: "output_type.uri: not a valid mysql:// URI"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, out := tc.input, tc.output
			if in == "" {
				in = `{"type": "generate", "context": "{}", "count": 1}`
			}
			if out == "" {
				out = `{"type": "drop"}`
			}
			doc := `{"streams": [{"id": "s", "input": ` + in + `, "pipeline": {"processors": []}, "output": ` + out + `}]}`
			cfg, err := componenttest.Materialize(doc)
			problems := config.Problems(err)
			if err == nil {
				problems = engine.Check(cfg, component.Default)
			}
			for _, p := range problems {
				if strings.Contains(p.Message, "hunter2") {
					t.Errorf("problem shows the password: %v", p)
				}
				if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
					return
				}
			}
			t.Fatalf("want %s: ...%s...; got %v", tc.path, tc.msg, problems)
		})
	}
}

// TestNoPasswordInErrors: URIs that do not parse, and servers that do not
// answer, give errors without the password.
func TestNoPasswordInErrors(t *testing.T) {
	for _, c := range []DBConfig{
		{Type: "postgres", URI: "postgres://u:hunter2@127.0.0.1:bad/db"},
		{Type: "postgres", URI: "host=127.0.0.1 password=hunter2 port=x"},
		{Type: "mysql", URI: "mysql://u:hunter2@127.0.0.1:bad/db"},
		{Type: "mysql", URI: "u:hunter2@tcp(127.0.0.1:1/db"},
	} {
		if _, err := parseDB("input_type", c, component.Resources{}); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error %v; want one without the password", c.URI, err)
		}
	}
	free, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	port := itoaPort(free)
	for _, c := range []DBConfig{
		{Type: "postgres", URI: "postgres://u:hunter2@127.0.0.1:" + port + "/db"},
		{Type: "mysql", URI: "mysql://u:hunter2@127.0.0.1:" + port + "/db"},
	} {
		d, err := parseDB("input_type", c, component.Resources{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.connect(context.Background())
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "127.0.0.1:"+port) {
			t.Errorf("%s: connect error %v; want one naming the server without the password", c.Type, err)
		}
	}
	d := &database{secrets: []string{"hunter2"}}
	if got := d.scrub(errString("auth failed for u:hunter2")).Error(); got != "auth failed for u:xxxxx" {
		t.Errorf("scrub = %q", got)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func itoaPort(p int) string { b, _ := json.Marshal(p); return string(b) }

// TestMySQLURI: ArkFlow's mysql:// URIs and driver DSNs.
func TestMySQLURI(t *testing.T) {
	for _, tc := range []struct{ uri, user, pass, addr, db string }{
		{"mysql://root:p%40ss%2Fw:rd@db.local:3307/app?charset=utf8mb4", "root", "p@ss/w:rd", "db.local:3307", "app"},
		{"mysql://u@127.0.0.1/app", "u", "", "127.0.0.1:3306", "app"},
		{"u:pw@tcp(127.0.0.1:3306)/app?parseTime=true", "u", "pw", "127.0.0.1:3306", "app"},
	} {
		cfg, err := mysqlConfig(tc.uri)
		if err != nil {
			t.Errorf("%s: %v", tc.uri, err)
			continue
		}
		got := []string{cfg.User, cfg.Passwd, cfg.Addr, cfg.DBName}
		if diff := cmp.Diff([]string{tc.user, tc.pass, tc.addr, tc.db}, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.uri, diff)
		}
	}
}

// TestStatement: identifiers quoted per dialect, values only as
// parameters, the upsert clause per database.
func TestStatement(t *testing.T) {
	out := func(kind, mode string, keys ...string) *Output {
		return &Output{conf: OutputConfig{TableName: `app.ev"t`, Mode: mode, KeyColumns: keys}, dialect: dialect{kind: kind}}
	}
	cols := []string{"id", "na`me", "v"}
	for _, tc := range []struct {
		o    *Output
		cols []string
		want string
	}{
		{out("postgres", "insert"), cols, `INSERT INTO "app"."ev""t" ("id", "na` + "`" + `me", "v") VALUES ($1, $2, $3), ($4, $5, $6)`},
		{out("sqlite", "upsert", "id"), cols, `INSERT INTO "app"."ev""t" ("id", "na` + "`" + `me", "v") VALUES (?, ?, ?), (?, ?, ?) ON CONFLICT ("id") DO UPDATE SET "na` + "`" + `me" = EXCLUDED."na` + "`" + `me", "v" = EXCLUDED."v"`},
		{out("mysql", "upsert", "id"), cols, "INSERT INTO `app`.`ev\"t` (`id`, `na``me`, `v`) VALUES (?, ?, ?), (?, ?, ?) ON DUPLICATE KEY UPDATE `na``me` = VALUES(`na``me`), `v` = VALUES(`v`)"},
		{out("postgres", "upsert", "id"), []string{"id"}, `INSERT INTO "app"."ev""t" ("id") VALUES ($1), ($2) ON CONFLICT ("id") DO NOTHING`},
		{out("mysql", "upsert", "id"), []string{"id"}, "INSERT INTO `app`.`ev\"t` (`id`) VALUES (?), (?) ON DUPLICATE KEY UPDATE `id` = `id`"},
	} {
		if diff := cmp.Diff(tc.want, tc.o.statement(tc.cols, 2)); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tc.o.dialect.kind, tc.o.conf.Mode, diff)
		}
	}
}

// TestJSONValue: SQL values as JSON.
func TestJSONValue(t *testing.T) {
	for _, tc := range []struct {
		v    any
		typ  string
		want string
	}{
		{nil, "TEXT", `null`},
		{int64(7), "INT8", `7`},
		{3.5, "FLOAT8", `3.5`},
		{true, "BOOL", `true`},
		{"12.50", "NUMERIC", `12.50`},
		{[]byte("42"), "BIGINT", `42`}, // MySQL text protocol
		{[]byte("12.5"), "DECIMAL", `12.5`},
		{[]byte(`{"a":1}`), "JSON", `{"a":1}`},
		{[]byte{0, 255}, "BYTEA", `"AP8="`},
		{[]byte{0xff, 0xfe}, "TEXT", `"//4="`},
		{"hi", "VARCHAR", `"hi"`},
		{"not a number", "NUMERIC", `"not a number"`},
		{"null", "NUMERIC", `"null"`},
		{"-0.5e+3", "NUMERIC", `-0.5e+3`},
		{"01", "NUMERIC", `"01"`},
		{[16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8}, "UUID", `"12345678-9abc-def0-0102-030405060708"`},
	} {
		b, err := json.Marshal(jsonValue(tc.v, tc.typ))
		if err != nil || string(b) != tc.want {
			t.Errorf("jsonValue(%v, %s) = %s, %v; want %s", tc.v, tc.typ, b, err, tc.want)
		}
	}
}

// FuzzPayloadRow: any payload either is refused or becomes bind values,
// and any text a database returns becomes valid JSON.
func FuzzPayloadRow(f *testing.F) {
	for _, s := range []string{`{"id": 1, "v": "x"}`, `{"n": 1e400, "o": {"a": [1]}}`, `[1]`, `{"a":1} {}`, `null`, `{"x": 12345678901234567890}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		m, err := decodeObject(payload)
		if err == nil {
			for k, v := range m {
				if _, err := bindValue(v); err != nil {
					t.Fatalf("field %q: %v", k, err)
				}
			}
			if _, err := lastPerKey([]map[string]any{m, m}, []string{"id"}); err != nil && m["id"] != nil {
				t.Fatalf("lastPerKey: %v", err)
			}
		}
		for _, typ := range []string{"TEXT", "JSON", "NUMERIC", "BYTEA", ""} {
			row, err := rowJSON([]string{string(payload)}, []string{typ}, []any{payload})
			if err != nil || !json.Valid(row) {
				t.Fatalf("rowJSON(%q, %s) = %s, %v", payload, typ, row, err)
			}
			if utf8.Valid(payload) {
				if _, err := rowJSON([]string{"c"}, []string{typ}, []any{string(payload)}); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
