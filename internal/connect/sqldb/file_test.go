package sqldb

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

const readings = `{"device":"a","reading":1}
{"device":"b","reading":2.5}

{"device":"c","reading":3}
`

// readAll reads a file input to its end, acknowledging each batch with
// the error fail returns for it, and returns the rows of the batches
// acknowledged with nil, as JSON.
func readAll(t *testing.T, in component.Input, fail func(i int) error) []string {
	t.Helper()
	ctx := context.Background()
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(ctx) })
	var rows []string
	for i := 0; i < 100; i++ {
		b, ack, err := in.Read(ctx)
		if errors.Is(err, message.ErrEndOfInput) {
			return rows
		}
		if err != nil {
			t.Fatal(err)
		}
		if b.Table == nil {
			t.Fatalf("batch %d: want a table", i)
		}
		aerr := fail(i)
		if aerr == nil {
			js, err := columnar.ToJSON(b.Table, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range js {
				rows = append(rows, string(j))
			}
		}
		if err := ack(ctx, aerr); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("no end of input after 100 reads")
	return nil
}

func never(int) error { return nil }

func TestFileInputLocal(t *testing.T) {
	dir := t.TempDir()
	lines := filepath.Join(dir, "readings.json")
	array := filepath.Join(dir, "array.json")
	if err := os.WriteFile(lines, []byte(readings), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(array, []byte(`[{"device":"a","reading":1},{"device":"b","reading":2.5},{"device":"c","reading":3}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"device":"b","reading":2.5,"scaled":25}`,
		`{"device":"c","reading":3,"scaled":30}`,
	}
	for name, conf := range map[string]map[string]any{
		"lines":                   {"input_type": map[string]any{"type": "json", "path": lines}},
		"array, file:// and name": {"input_type": map[string]any{"type": "json", "path": "file://" + array, "name": "r"}},
	} {
		t.Run(name, func(t *testing.T) {
			table := "flow"
			if n, ok := conf["input_type"].(map[string]any)["name"]; ok {
				table = n.(string)
			}
			conf["select_sql"] = "SELECT device, reading, reading * 10 AS scaled FROM " + table + " WHERE reading > 2 ORDER BY device"
			conf["batch_size"] = 1
			in, err := NewInput(conf, component.Resources{})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, readAll(t, in, never)); d != "" {
				t.Errorf("rows (-want +got):\n%s", d)
			}
		})
	}
}

// TestFileInputRedelivers hands a failed batch out again and ends only
// once every batch was acknowledged.
func TestFileInputRedelivers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(path, []byte(readings), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := NewInput(map[string]any{
		"select_sql": "SELECT device FROM flow ORDER BY device",
		"input_type": map[string]any{"type": "json", "path": path},
		"batch_size": 2,
	}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, in, func(i int) error {
		if i == 0 {
			return errors.New("output down")
		}
		return nil
	})
	want := []string{`{"device":"a"}`, `{"device":"b"}`, `{"device":"c"}`} // a and b only because they were handed out again
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("rows (-want +got):\n%s", d)
	}
}

// TestFileInputS3 reads the file from an S3-compatible server with the
// object_store shape of ArkFlow's sql_input_example.
func TestFileInputS3(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("fp-data"); err != nil {
		t.Fatal(err)
	}
	if _, err := backend.PutObject("fp-data", "in/readings.json", nil, bytes.NewReader([]byte(readings)), int64(len(readings)), nil); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	in, err := NewInput(map[string]any{
		"select_sql": "SELECT count(*) AS n, sum(reading) AS total FROM flow;",
		"input_type": map[string]any{
			"type": "json",
			"path": "s3://fp-data/in/readings.json",
			"object_store": map[string]any{
				"type": "s3", "endpoint": srv.URL, "region": "us-east-1", "bucket_name": "fp-data",
				"access_key_id": "local-key", "secret_access_key": "local-secret", "allow_http": true,
			},
		},
	}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{`{"n":3,"total":6.5}`}, readAll(t, in, never)); d != "" {
		t.Errorf("rows (-want +got):\n%s", d)
	}
}

func TestFileInputErrors(t *testing.T) {
	s3 := func(extra map[string]any) map[string]any {
		os := map[string]any{"bucket_name": "b", "endpoint": "http://127.0.0.1:1", "allow_http": true}
		for k, v := range extra {
			os[k] = v
		}
		return os
	}
	for name, tc := range map[string]struct {
		conf map[string]any
		want string
	}{
		"no path":           {map[string]any{"type": "json"}, "input_type.path: required for json"},
		"s3 without store":  {map[string]any{"type": "json", "path": "s3://b/k"}, "input_type.object_store: required for an s3:// path"},
		"store without s3":  {map[string]any{"type": "json", "path": "/tmp/x.json", "object_store": s3(nil)}, "input_type.object_store: only with an s3:// path"},
		"other bucket":      {map[string]any{"type": "json", "path": "s3://c/k", "object_store": s3(nil)}, `bucket_name: "b" is not the bucket of path ("c")`},
		"http not allowed":  {map[string]any{"type": "json", "path": "s3://b/k", "object_store": s3(map[string]any{"allow_http": false})}, "an http:// endpoint needs allow_http: true"},
		"half credentials":  {map[string]any{"type": "json", "path": "s3://b/k", "object_store": s3(map[string]any{"access_key_id": "k"})}, "access_key_id and secret_access_key go together"},
		"other scheme":      {map[string]any{"type": "json", "path": "gs://b/k"}, `scheme "gs" is not supported`},
		"uri":               {map[string]any{"type": "json", "path": "/x", "uri": "postgres://x"}, "uri and ssl are for databases"},
		"store on postgres": {map[string]any{"type": "postgres", "uri": "postgres://127.0.0.1/x", "object_store": s3(nil)}, "input_type.object_store: only for type json"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewInput(map[string]any{"select_sql": "SELECT * FROM flow", "input_type": tc.conf}, component.Resources{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	_, err := NewInput(map[string]any{"select_sql": "DELETE FROM flow", "input_type": map[string]any{"type": "json", "path": "/x"}}, component.Resources{})
	if err == nil || !strings.Contains(err.Error(), "select_sql: ") {
		t.Fatalf("DML: err = %v, want a select_sql error", err)
	}
	_, err = NewInput(map[string]any{"select_sql": "SELECT 1", "cursor": map[string]any{"column": "id", "initial": 0},
		"input_type": map[string]any{"type": "json", "path": "/x"}}, component.Resources{})
	if err == nil || !strings.Contains(err.Error(), "cursor: not used by json") {
		t.Fatalf("cursor: err = %v", err)
	}
	in, err := NewInput(map[string]any{"select_sql": "SELECT 1", "input_type": map[string]any{"type": "json", "path": filepath.Join(t.TempDir(), "missing.json")}}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	err = in.Connect(context.Background())
	if err == nil || !component.IsPermanent(err) {
		t.Fatalf("missing file: err = %v, want a permanent error", err)
	}
}
