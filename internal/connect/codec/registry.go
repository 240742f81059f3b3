package codec

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterCodec(component.Spec{
		Name: "schema_registry",
		Summary: "Decodes payloads in the Confluent wire format (magic byte 0, 4-byte schema id, the body): " +
			"fetches each schema id once from a Confluent Schema Registry and decodes the body as Avro or " +
			"Protobuf into a table row. Decode only.",
		Schema: component.ObjectSchema(map[string]any{
			"registry_url": prop("string", "The registry's root URL, such as http://registry:8081."),
			"message_type": prop("string", "For Protobuf schemas: the fully qualified message type. When "+
				"empty, the message indexes in each payload choose it."),
			"auth": map[string]any{
				"type":                 "object",
				"description":          "Registry authentication: {type: basic, username, password} or {type: bearer, token}.",
				"additionalProperties": false,
				"required":             []string{"type"},
				"properties": map[string]any{
					"type":     component.EnumProp("basic or bearer.", "", "basic", "bearer"),
					"username": prop("string", "The basic user name."),
					"password": prop("string", "The basic password."),
					"token":    prop("string", "The bearer token."),
				},
			},
		}, "registry_url"),
		Example: `type: schema_registry
registry_url: http://127.0.0.1:8081
message_type: example.v1.Reading
auth:
  type: basic
  username: reader
  password: ${secret:env:SR_PASSWORD}
`,
	}, NewSchemaRegistry)
}

var (
	_ component.Codec    = (*SchemaRegistry)(nil)
	_ component.Columnar = (*SchemaRegistry)(nil)
)

// ErrWireFormat is returned for a payload not in the Confluent wire
// format.
var ErrWireFormat = errors.New("not in the Confluent wire format")

// SchemaRegistry is the schema_registry codec.
type SchemaRegistry struct {
	base        *url.URL
	messageType string
	authHeader  string // the Authorization header, never logged
	client      *http.Client

	mu    sync.Mutex                 // guards cache
	cache map[uint32]*registrySchema // decoders by schema id; failures are not cached
}

// registrySchema is a fetched schema ready to decode bodies.
type registrySchema struct {
	avro  *avroRecord
	proto protoreflect.FileDescriptor
	named *protoTable // message_type's table, when set
}

// NewSchemaRegistry builds the schema_registry codec.
func NewSchemaRegistry(conf map[string]any, res component.Resources) (component.Codec, error) {
	var c struct {
		RegistryURL string `json:"registry_url"`
		MessageType string `json:"message_type"`
		Auth        *struct {
			Type     string `json:"type"`
			Username string `json:"username"`
			Password string `json:"password"`
			Token    string `json:"token"`
		} `json:"auth"`
	}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	u, err := url.Parse(c.RegistryURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("registry_url: want an http or https URL")
	}
	s := &SchemaRegistry{
		base:        u,
		messageType: c.MessageType,
		client:      &http.Client{Timeout: 30 * time.Second, Transport: res.Net.HTTPTransport(nil)},
		cache:       make(map[uint32]*registrySchema),
	}
	if a := c.Auth; a != nil {
		switch a.Type {
		case "basic":
			if a.Username == "" {
				return nil, errors.New("auth.username: required for basic auth")
			}
			req := &http.Request{Header: http.Header{}}
			req.SetBasicAuth(a.Username, a.Password)
			s.authHeader = req.Header.Get("Authorization")
		case "bearer":
			if a.Token == "" {
				return nil, errors.New("auth.token: required for bearer auth")
			}
			s.authHeader = "Bearer " + a.Token
		default:
			return nil, fmt.Errorf("auth.type: want basic or bearer, got %q", a.Type)
		}
	}
	return s, nil
}

// Columnar: Encode reads tables (to refuse them).
func (*SchemaRegistry) Columnar() {}

// wireHeader is the parsed prefix of a Confluent wire-format payload.
type wireHeader struct {
	id   uint32
	body []byte // for Protobuf, the message indexes (parseIndexes) come first
}

// parseWire splits the magic byte and schema id from p; body is the rest.
func parseWire(p []byte) (wireHeader, error) {
	if len(p) < 5 {
		return wireHeader{}, fmt.Errorf("%w: %d bytes, want at least 5", ErrWireFormat, len(p))
	}
	if p[0] != 0 {
		return wireHeader{}, fmt.Errorf("%w: magic byte %d, want 0", ErrWireFormat, p[0])
	}
	return wireHeader{id: binary.BigEndian.Uint32(p[1:5]), body: p[5:]}, nil
}

// maxIndexes bounds the message-index array: nesting deeper than this is
// not a real schema.
const maxIndexes = 64

// parseIndexes reads the Protobuf message-index array at the start of
// body: a zigzag varint count, then that many zigzag varint indexes; a
// count of 0 means [0], the file's first message.
func parseIndexes(body []byte) (indexes []int64, rest []byte, err error) {
	n, k := binary.Varint(body)
	if k <= 0 {
		return nil, nil, fmt.Errorf("%w: bad message-index count", ErrWireFormat)
	}
	body = body[k:]
	if n == 0 {
		return []int64{0}, body, nil
	}
	if n < 0 || n > maxIndexes {
		return nil, nil, fmt.Errorf("%w: message-index count %d", ErrWireFormat, n)
	}
	indexes = make([]int64, n)
	for i := range indexes {
		v, k := binary.Varint(body)
		if k <= 0 || v < 0 {
			return nil, nil, fmt.Errorf("%w: bad message index", ErrWireFormat)
		}
		indexes[i], body = v, body[k:]
	}
	return indexes, body, nil
}

// Decode decodes each payload with the schema its id names: one row each.
// Rows of different schemas share columns by name.
func (s *SchemaRegistry) Decode(ctx context.Context, b message.Batch) (message.Batch, error) {
	payloads, err := payloadsOf(b, columnar.ValueField)
	if err != nil {
		return message.Batch{}, err
	}
	var t tableBuilder
	for i, p := range payloads {
		if err := s.decodeInto(ctx, &t, p); err != nil {
			return message.Batch{}, fmt.Errorf("payload %d: %w", i, err)
		}
	}
	rec, err := t.build()
	if err != nil {
		return message.Batch{}, err
	}
	if rec, err = withMeta(rec, b, nil); err != nil {
		return message.Batch{}, err
	}
	return message.Batch{Table: rec}, nil
}

func (s *SchemaRegistry) decodeInto(ctx context.Context, t *tableBuilder, p []byte) error {
	h, err := parseWire(p)
	if err != nil {
		return err
	}
	rs, err := s.schema(ctx, h.id)
	if err != nil {
		return err
	}
	if rs.avro != nil {
		return rs.avro.decodeInto(t, h.body)
	}
	indexes, body, err := parseIndexes(h.body)
	if err != nil {
		return err
	}
	pt := rs.named
	if pt == nil {
		md, err := messageAt(rs.proto, indexes)
		if err != nil {
			return fmt.Errorf("schema %d: %w", h.id, err)
		}
		pt = newProtoTable(md)
	}
	row, err := pt.row(body)
	if err != nil {
		return fmt.Errorf("schema %d: %s: %w", h.id, pt.md.FullName(), err)
	}
	idx := make([]any, 0, len(row))
	for i, c := range pt.cols {
		j, err := t.column(c)
		if err != nil {
			return err
		}
		for len(idx) <= j {
			idx = append(idx, nil)
		}
		idx[j] = row[i]
	}
	t.add(idx)
	return nil
}

// messageAt follows message indexes into a file's messages.
func messageAt(fd protoreflect.FileDescriptor, indexes []int64) (protoreflect.MessageDescriptor, error) {
	msgs := fd.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range indexes {
		if i >= int64(msgs.Len()) {
			return nil, fmt.Errorf("message index %d out of range (%d messages)", i, msgs.Len())
		}
		md = msgs.Get(int(i))
		msgs = md.Messages()
	}
	if md == nil {
		return nil, errors.New("no message index")
	}
	return md, nil
}

// Encode is not supported: the codec only reads.
func (*SchemaRegistry) Encode(context.Context, message.Batch) (message.Batch, error) {
	return message.Batch{}, errors.New("schema_registry: encoding is not supported (decode only)")
}

// schema returns the decoder of schema id, fetching it on first use.
// Concurrent first uses may fetch twice; the cache keeps one.
func (s *SchemaRegistry) schema(ctx context.Context, id uint32) (*registrySchema, error) {
	s.mu.Lock()
	rs, ok := s.cache[id]
	s.mu.Unlock()
	if ok {
		return rs, nil
	}
	rs, err := s.fetch(ctx, id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.cache[id] = rs
	s.mu.Unlock()
	return rs, nil
}

// fetch gets schema id from the registry and prepares its decoder. Its
// errors name the URL without credentials and never the auth header.
func (s *SchemaRegistry) fetch(ctx context.Context, id uint32) (*registrySchema, error) {
	u := s.base.JoinPath("schemas", "ids", strconv.FormatUint(uint64(id), 10))
	where := u.Redacted()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("schema %d: %w", id, err)
	}
	req.Header.Set("Accept", "application/vnd.schemaregistry.v1+json, application/json")
	if s.authHeader != "" {
		req.Header.Set("Authorization", s.authHeader)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("schema %d: registry unreachable at %s: %w", id, where, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("schema %d: reading %s: %w", id, where, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("schema %d: registry %s answered %s", id, where, resp.Status)
	}
	var doc struct {
		Schema     string `json:"schema"`
		SchemaType string `json:"schemaType"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("schema %d: registry %s: bad answer: %w", id, where, err)
	}
	switch strings.ToUpper(doc.SchemaType) {
	case "", "AVRO":
		r, err := newAvroRecord(doc.Schema)
		if err != nil {
			return nil, fmt.Errorf("schema %d (AVRO): %w", id, err)
		}
		return &registrySchema{avro: r}, nil
	case "PROTOBUF":
		fd, err := compileSchema(ctx, doc.Schema)
		if err != nil {
			return nil, fmt.Errorf("schema %d (PROTOBUF): %w", id, err)
		}
		rs := &registrySchema{proto: fd}
		if s.messageType != "" {
			d, err := findIn(fd, protoreflect.FullName(s.messageType))
			if err != nil {
				return nil, fmt.Errorf("schema %d: message_type %q is not in the schema", id, s.messageType)
			}
			rs.named = newProtoTable(d.(protoreflect.MessageDescriptor))
		}
		return rs, nil
	default:
		return nil, fmt.Errorf("schema %d: schema type %s is not supported (AVRO or PROTOBUF)", id, doc.SchemaType)
	}
}

// findIn finds a message anywhere in a file, nested ones included.
func findIn(fd protoreflect.FileDescriptor, name protoreflect.FullName) (protoreflect.Descriptor, error) {
	var walk func(protoreflect.MessageDescriptors) protoreflect.Descriptor
	walk = func(ms protoreflect.MessageDescriptors) protoreflect.Descriptor {
		for i := range ms.Len() {
			m := ms.Get(i)
			if m.FullName() == name {
				return m
			}
			if d := walk(m.Messages()); d != nil {
				return d
			}
		}
		return nil
	}
	if d := walk(fd.Messages()); d != nil {
		return d, nil
	}
	return nil, fmt.Errorf("%s not found", name)
}
