package codec

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hamba/avro/v2"
)

const registryProto = `syntax = "proto3";
package fp.example;
message Account {
  int64 id = 1;
  string name = 2;
  message Inner { bool flag = 1; }
}
message Other { string tag = 1; }
`

const registryAvro = `{"type": "record", "name": "Account", "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}`

// registry is a Confluent Schema Registry stand-in on 127.0.0.1 serving
// schemas by id; it counts requests and checks the Authorization header
// when auth is set.
type registry struct {
	*httptest.Server
	auth string

	mu   sync.Mutex
	hits map[string]int
}

func newRegistry(t *testing.T, auth string) *registry {
	t.Helper()
	r := &registry{auth: auth, hits: map[string]int{}}
	schemas := map[string]map[string]any{
		"1": {"schema": registryAvro},
		"2": {"schema": registryProto, "schemaType": "PROTOBUF"},
		"3": {"schema": `{"type": "object"}`, "schemaType": "JSON"},
		"4": {"schema": "not proto", "schemaType": "PROTOBUF"},
		"5": {"schema": registryAvro, "schemaType": "AVRO"},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /schemas/ids/{id}", func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hits[req.PathValue("id")]++
		r.mu.Unlock()
		if r.auth != "" && req.Header.Get("Authorization") != r.auth {
			http.Error(w, `{"error_code": 401, "message": "Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		s, ok := schemas[req.PathValue("id")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error_code": 40403, "message": "Schema not found"}`))
			return
		}
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		_ = json.NewEncoder(w).Encode(s)
	})
	r.Server = httptest.NewServer(mux)
	t.Cleanup(r.Close)
	return r
}

func (r *registry) hitsOf(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[id]
}

// wire frames body in the Confluent wire format; indexes, when not nil,
// are the Protobuf message indexes.
func wire(id uint32, indexes []int64, body []byte) string {
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], id)
	if indexes != nil {
		if len(indexes) == 1 && indexes[0] == 0 {
			b = append(b, 0)
		} else {
			b = binary.AppendVarint(b, int64(len(indexes)))
			for _, i := range indexes {
				b = binary.AppendVarint(b, i)
			}
		}
	}
	return string(append(b, body...))
}

func TestSchemaRegistryDecode(t *testing.T) {
	reg := newRegistry(t, "")
	accountMD := compiled(t, registryProto, "fp.example.Account")
	otherMD := compiled(t, registryProto, "fp.example.Other")
	account := protoBytes(t, accountMD, `{"id": "7", "name": "ann"}`)
	other := protoBytes(t, otherMD, `{"tag": "t"}`)
	avroBody, err := avro.Marshal(avro.MustParse(registryAvro), map[string]any{"id": int64(9), "name": "bob"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		messageType string
		in          []string
		want        tbl
	}{
		{
			name: "protobuf by message indexes",
			in:   []string{wire(2, []int64{0}, []byte(account)), wire(2, []int64{1}, []byte(other))},
			want: tbl{Cols: []string{"id int64", "name utf8", "tag utf8"}, Rows: [][]any{{int64(7), "ann", nil}, {nil, nil, "t"}}},
		},
		{
			name:        "protobuf by message_type",
			messageType: "fp.example.Account",
			in:          []string{wire(2, []int64{0}, []byte(account))},
			want:        tbl{Cols: []string{"id int64", "name utf8"}, Rows: [][]any{{int64(7), "ann"}}},
		},
		{
			name: "nested message index",
			in:   []string{wire(2, []int64{0, 0}, []byte("\x08\x01"))},
			want: tbl{Cols: []string{"flag bool"}, Rows: [][]any{{true}}},
		},
		{
			name: "avro, and avro and protobuf in one batch",
			in:   []string{wire(1, nil, avroBody), wire(5, nil, avroBody), wire(2, []int64{0}, []byte(account))},
			want: tbl{Cols: []string{"id int64", "name utf8"}, Rows: [][]any{{int64(9), "bob"}, {int64(9), "bob"}, {int64(7), "ann"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf := map[string]any{"registry_url": reg.URL}
			if tt.messageType != "" {
				conf["message_type"] = tt.messageType
			}
			c := newCodec(t, "schema_registry", conf)
			for range 2 { // the second batch is served from the cache
				out, err := c.Decode(ctx, msgs(tt.in...))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, dump(t, out.Table)); diff != "" {
					t.Errorf("(-want +got)\n%s", diff)
				}
			}
		})
	}
	for id, codecs := range map[string]int{"1": 1, "2": 4, "5": 1} {
		if n := reg.hitsOf(id); n != codecs {
			t.Errorf("schema %s fetched %d times by %d codecs, want once each", id, n, codecs)
		}
	}
}

func compiled(t *testing.T, text, name string) protoMD {
	t.Helper()
	fd, err := compileSchema(ctx, text)
	if err != nil {
		t.Fatal(err)
	}
	d, err := findIn(fd, protoName(name))
	if err != nil {
		t.Fatal(err)
	}
	return d.(protoMD)
}

func TestSchemaRegistryAuth(t *testing.T) {
	const secret = "s3cr3t-value"
	tests := []struct {
		name    string
		server  string // the header the registry wants
		auth    map[string]any
		wantErr string
	}{
		{"basic", "Basic dXNlcjpzM2NyM3QtdmFsdWU=", map[string]any{"type": "basic", "username": "user", "password": secret}, ""},
		{"bearer", "Bearer " + secret, map[string]any{"type": "bearer", "token": secret}, ""},
		{"wrong password", "Basic dXNlcjpzM2NyM3QtdmFsdWU=", map[string]any{"type": "basic", "username": "user", "password": secret + "x"}, "answered 401 Unauthorized"},
		{"no auth", "Bearer " + secret, nil, "answered 401 Unauthorized"},
	}
	avroBody, err := avro.Marshal(avro.MustParse(registryAvro), map[string]any{"id": int64(1), "name": "a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := newRegistry(t, tt.server)
			conf := map[string]any{"registry_url": reg.URL}
			if tt.auth != nil {
				conf["auth"] = tt.auth
			}
			_, err := newCodec(t, "schema_registry", conf).Decode(ctx, msgs(wire(1, nil, avroBody)))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), secret):
				t.Fatalf("error shows the secret: %v", err)
			}
		})
	}
}

func TestSchemaRegistryErrors(t *testing.T) {
	reg := newRegistry(t, "")
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	tests := []struct {
		name string
		url  string
		in   string
		want string
	}{
		{"unknown id", reg.URL, wire(99, nil, nil), "payload 0: schema 99: registry " + reg.URL + "/schemas/ids/99 answered 404 Not Found"},
		{"registry down", downURL, wire(1, nil, nil), "payload 0: schema 1: registry unreachable at " + downURL + "/schemas/ids/1: "},
		{"short payload", reg.URL, "\x00\x01", "payload 0: not in the Confluent wire format: 2 bytes, want at least 5"},
		{"bad magic", reg.URL, "\x01\x00\x00\x00\x01x", "payload 0: not in the Confluent wire format: magic byte 1, want 0"},
		{"json schema", reg.URL, wire(3, nil, nil), "payload 0: schema 3: schema type JSON is not supported (AVRO or PROTOBUF)"},
		{"bad protobuf schema", reg.URL, wire(4, []int64{0}, nil), "payload 0: schema 4 (PROTOBUF): "},
		{"index out of range", reg.URL, wire(2, []int64{5}, nil), "payload 0: schema 2: message index 5 out of range (2 messages)"},
		{"truncated avro body", reg.URL, wire(1, nil, []byte{0x80}), "payload 0: avro: payload too short for the schema"},
		{"no message indexes", reg.URL, wire(2, nil, nil), "payload 0: not in the Confluent wire format: bad message-index count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newCodec(t, "schema_registry", map[string]any{"registry_url": tt.url}).Decode(ctx, msgs(tt.in))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error %v, want prefix %q", err, tt.want)
			}
		})
	}
	_, err := newCodec(t, "schema_registry", map[string]any{"registry_url": reg.URL}).Decode(ctx, msgs("\x01"))
	if !errors.Is(err, ErrWireFormat) {
		t.Errorf("error %v is not ErrWireFormat", err)
	}
	_, err = newCodec(t, "schema_registry", map[string]any{"registry_url": reg.URL, "message_type": "fp.example.Nope"}).Decode(ctx, msgs(wire(2, []int64{0}, nil)))
	if err == nil || err.Error() != `payload 0: schema 2: message_type "fp.example.Nope" is not in the schema` {
		t.Errorf("unknown message_type: error %v", err)
	}
	if _, err := newCodec(t, "schema_registry", map[string]any{"registry_url": reg.URL}).Encode(ctx, msgs("x")); err == nil {
		t.Error("encode: no error")
	}
}

func TestSchemaRegistryConfigErrors(t *testing.T) {
	tests := []struct {
		conf map[string]any
		want string
	}{
		{map[string]any{"registry_url": "ftp://x"}, "registry_url: want an http or https URL"},
		{map[string]any{"registry_url": "localhost:8081"}, "registry_url: want an http or https URL"},
		{map[string]any{"registry_url": "http://r", "auth": map[string]any{"type": "basic"}}, "auth.username: required for basic auth"},
		{map[string]any{"registry_url": "http://r", "auth": map[string]any{"type": "bearer"}}, "auth.token: required for bearer auth"},
		{map[string]any{"registry_url": "http://r", "auth": map[string]any{"type": "oauth"}}, `auth.type: want basic or bearer, got "oauth"`},
	}
	for _, tt := range tests {
		if _, err := NewSchemaRegistry(tt.conf, resNone); err == nil || err.Error() != tt.want {
			t.Errorf("%v: error %v, want %q", tt.conf, err, tt.want)
		}
	}
}

func TestParseIndexes(t *testing.T) {
	tests := []struct {
		in   string
		want []int64
		rest string
		err  bool
	}{
		{"\x00body", []int64{0}, "body", false},
		{"\x02\x02body", []int64{1}, "body", false},
		{"\x04\x00\x04b", []int64{0, 2}, "b", false},
		{"", nil, "", true},
		{"\x03", nil, "", true},     // count -2
		{"\x04\x02", nil, "", true}, // 2 indexes, 1 given
		{"\x02\x01", nil, "", true}, // index -1
		{"\xff\x01", nil, "", true}, // count 64 would be fine, -... bad
		{"\x82\x01", nil, "", true}, // count 65
	}
	for _, tt := range tests {
		got, rest, err := parseIndexes([]byte(tt.in))
		if (err != nil) != tt.err {
			t.Errorf("%q: error %v", tt.in, err)
			continue
		}
		if err == nil && (!cmp.Equal(tt.want, got) || string(rest) != tt.rest) {
			t.Errorf("%q: got %v %q, want %v %q", tt.in, got, rest, tt.want, tt.rest)
		}
	}
}

func FuzzWireHeader(f *testing.F) {
	f.Add([]byte(wire(1, nil, []byte("x"))))
	f.Add([]byte(wire(2, []int64{0}, []byte("x"))))
	f.Add([]byte(wire(2, []int64{1, 2, 3}, nil)))
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		h, err := parseWire(p)
		if err != nil {
			if !errors.Is(err, ErrWireFormat) {
				t.Fatalf("error %v is not ErrWireFormat", err)
			}
			return
		}
		if len(h.body) != len(p)-5 || p[0] != 0 {
			t.Fatalf("body of %d bytes from %d", len(h.body), len(p))
		}
		idx, rest, err := parseIndexes(h.body)
		if err != nil {
			if !errors.Is(err, ErrWireFormat) {
				t.Fatalf("error %v is not ErrWireFormat", err)
			}
			return
		}
		if len(idx) == 0 || len(idx) > maxIndexes || len(rest) > len(h.body) {
			t.Fatalf("indexes %v, rest %d of %d", idx, len(rest), len(h.body))
		}
		for _, i := range idx {
			if i < 0 {
				t.Fatalf("negative index %v", idx)
			}
		}
	})
}
