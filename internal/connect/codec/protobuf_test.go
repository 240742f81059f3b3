package codec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/sandbox"
)

func protoConf(msgType string, inputs ...string) map[string]any {
	in := make([]any, len(inputs))
	for i, s := range inputs {
		in[i] = s
	}
	return map[string]any{"message_type": msgType, "proto_inputs": in}
}

func loadMD(t *testing.T, name string) protoreflect.MessageDescriptor {
	t.Helper()
	md, err := protoSource{MessageType: name, ProtoInputs: []string{"testdata/reading.proto"}}.load(ctx, sandbox.FS{})
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// protoBytes encodes a message given as protojson text.
func protoBytes(t *testing.T, md protoreflect.MessageDescriptor, js string) string {
	t.Helper()
	m := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(js), m); err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// protoText decodes a message to protojson text, for comparison.
func protoText(t *testing.T, md protoreflect.MessageDescriptor, b string) string {
	t.Helper()
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal([]byte(b), m); err != nil {
		t.Fatal(err)
	}
	out, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	_ = jsonUnmarshal(out, &v)
	c, _ := jsonMarshal(v)
	return string(c)
}

var everythingCols = []string{
	"b bool", "i32 int32", "s32 int32", "sf32 int32", "i64 int64", "s64 int64", "sf64 int64",
	"u32 uint32", "f32 uint32", "u64 uint64", "f64 uint64", "fl float32", "db float64", "s utf8",
	"raw binary", "unit int32", "maybe utf8", "nested json", "list json", "counts json",
}

func TestProtobufDecode(t *testing.T) {
	md := loadMD(t, "example.v1.Everything")
	full := protoBytes(t, md, `{"b": true, "i32": -1, "s32": -2, "sf32": -3, "i64": "-4", "s64": "-5", "sf64": "-6",
		"u32": 7, "f32": 8, "u64": "18446744073709551615", "f64": "10", "fl": 1.5, "db": 2.25, "s": "x",
		"raw": "AQI=", "unit": "UNIT_CELSIUS", "maybe": "", "nested": {"ts": "3", "device": "d"},
		"list": ["1", "2"], "counts": {"a": "1"}}`)
	empty := protoBytes(t, md, `{}`)
	out, err := newCodec(t, "protobuf", protoConf("example.v1.Everything", "testdata/reading.proto")).
		Decode(ctx, msgs(full, empty))
	if err != nil {
		t.Fatal(err)
	}
	want := tbl{Cols: everythingCols, Rows: [][]any{
		{true, int32(-1), int32(-2), int32(-3), int64(-4), int64(-5), int64(-6), uint32(7), uint32(8),
			uint64(18446744073709551615), uint64(10), float32(1.5), 2.25, "x", []byte{1, 2}, int32(1), "",
			`{"ts":"3","reading":0,"device":"d"}`, `["1","2"]`, `{"a":"1"}`},
		{false, int32(0), int32(0), int32(0), int64(0), int64(0), int64(0), uint32(0), uint32(0),
			uint64(0), uint64(0), float32(0), 0.0, "", []byte{}, int32(0), nil, nil, `[]`, `{}`},
	}}
	if diff := cmp.Diff(want, dump(t, out.Table)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestProtobufDecodeErrors(t *testing.T) {
	c := newCodec(t, "protobuf", protoConf("example.v1.Reading", "testdata/reading.proto"))
	_, err := c.Decode(ctx, msgs("ok", "\xff\xff"))
	const want = "payload 0: example.v1.Reading: "
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %v, want prefix %q", err, want)
	}
}

func TestProtobufEncode(t *testing.T) {
	md := loadMD(t, "example.v1.Reading")
	rec := build(t, []colDef{{name: "ts", typ: i64}, {name: "reading", typ: f64}, {name: "device", typ: str}, {name: "extra", typ: str}},
		[]any{int64(1), 2.5, "a", "ignored"}, []any{nil, nil, nil, nil})
	tests := []struct {
		name    string
		include []any
		want    []string
	}{
		{"all columns", nil, []string{`{"device":"a","reading":2.5,"ts":"1"}`, `{}`}},
		{"fields_to_include", []any{"ts"}, []string{`{"ts":"1"}`, `{}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf := protoConf("example.v1.Reading", "testdata/reading.proto")
			if tt.include != nil {
				conf["fields_to_include"] = tt.include
			}
			out, err := newCodec(t, "protobuf", conf).Encode(ctx, messageBatchOf(rec))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range payloadStrings(t, out) {
				got = append(got, protoText(t, md, p))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestProtobufRoundTrip(t *testing.T) {
	md := loadMD(t, "example.v1.Everything")
	conf := protoConf("example.v1.Everything", "testdata/reading.proto")
	c := newCodec(t, "protobuf", conf)
	in := protoBytes(t, md, `{"b": true, "i32": -1, "u64": "18446744073709551615", "fl": 1.5, "raw": "AQI=",
		"unit": "UNIT_CELSIUS", "maybe": "m", "nested": {"ts": "3"}, "list": ["1", "2"], "counts": {"a": "1"}}`)
	dec, err := c.Decode(ctx, msgs(in))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := c.Encode(ctx, dec)
	if err != nil {
		t.Fatal(err)
	}
	got := payloadStrings(t, enc)
	if len(got) != 1 || protoText(t, md, got[0]) != protoText(t, md, in) {
		t.Errorf("round trip: got %v, want %s", got, protoText(t, md, in))
	}
}

func TestProtoSources(t *testing.T) {
	dir := t.TempDir()
	// A descriptor set of reading.proto, as protoc --descriptor_set_out writes.
	md := loadMD(t, "example.v1.Reading")
	set := &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{protodesc.ToFileDescriptorProto(md.ParentFile())}}
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	setPath := write("reading.pb", string(b))
	write("tree/a/common.proto", "syntax = \"proto3\";\npackage c;\nmessage Unit { string name = 1; }\n")
	write("tree/b/user.proto", "syntax = \"proto3\";\npackage u;\nimport \"a/common.proto\";\nmessage User { c.Unit unit = 1; }\n")
	write("inc/dep.proto", "syntax = \"proto3\";\npackage d;\nmessage Dep { int32 x = 1; }\n")
	withImport := write("src/top.proto", "syntax = \"proto3\";\npackage t;\nimport \"dep.proto\";\nimport \"google/protobuf/timestamp.proto\";\n"+
		"message Top { d.Dep dep = 1; google.protobuf.Timestamp at = 2; }\n")
	emptyDir := filepath.Join(dir, "empty")
	if err := os.Mkdir(emptyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	write("bad.pb", "\xff\xff\xff")
	tests := []struct {
		name    string
		src     protoSource
		want    string // the message's full name, or the error
		wantErr bool
	}{
		{"proto file", protoSource{MessageType: "example.v1.Reading", ProtoInputs: []string{"testdata/reading.proto"}}, "example.v1.Reading", false},
		{"directory with imports", protoSource{MessageType: "u.User", ProtoInputs: []string{filepath.Join(dir, "tree")}}, "u.User", false},
		{"descriptor set", protoSource{MessageType: "example.v1.Reading", ProtoInputs: []string{setPath}}, "example.v1.Reading", false},
		{"includes and well-known types", protoSource{MessageType: "t.Top", ProtoInputs: []string{withImport}, ProtoIncludes: []string{filepath.Join(dir, "inc")}}, "t.Top", false},
		{"no message_type", protoSource{ProtoInputs: []string{"testdata/reading.proto"}}, "message_type: required", true},
		{"no inputs", protoSource{MessageType: "x.Y"}, "proto_inputs: at least one path is required", true},
		{"missing file", protoSource{MessageType: "x.Y", ProtoInputs: []string{"testdata/nope.proto"}}, "proto_inputs[0]: stat testdata/nope.proto: no such file or directory", true},
		{"empty directory", protoSource{MessageType: "x.Y", ProtoInputs: []string{emptyDir}}, "proto_inputs[0]: no .proto file under " + emptyDir, true},
		{"bad descriptor set", protoSource{MessageType: "x.Y", ProtoInputs: []string{filepath.Join(dir, "bad.pb")}}, "proto_inputs[0]: " + filepath.Join(dir, "bad.pb") + ": not a FileDescriptorSet", true},
		{"unknown message", protoSource{MessageType: "example.v1.Nope", ProtoInputs: []string{"testdata/reading.proto"}}, `message_type: "example.v1.Nope" not found in proto_inputs`, true},
		{"not a message", protoSource{MessageType: "example.v1.Unit", ProtoInputs: []string{"testdata/reading.proto"}}, `message_type: "example.v1.Unit" is not a message`, true},
		{"import missing", protoSource{MessageType: "t.Top", ProtoInputs: []string{withImport}}, `proto_inputs: `, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md, err := tt.src.load(ctx, sandbox.FS{})
			if tt.wantErr {
				if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
					t.Fatalf("error %v, want prefix %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(md.FullName()) != tt.want {
				t.Errorf("got %s, want %s", md.FullName(), tt.want)
			}
		})
	}
}

func TestProtobufProcessors(t *testing.T) {
	conf := protoConf("example.v1.Reading", "testdata/reading.proto")
	enc, err := component.Default.NewProcessor("arrow_to_protobuf", conf, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := component.Default.NewProcessor("protobuf_to_arrow", conf, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	if !component.IsColumnar(enc) || !component.IsColumnar(dec) {
		t.Fatal("processors must be columnar")
	}
	rec := build(t, []colDef{{name: "device", typ: str}, {name: "ts", typ: i64}}, []any{"a", int64(5)}, []any{"b", nil})
	mid, err := enc.Process(ctx, messageBatchOf(rec))
	if err != nil {
		t.Fatal(err)
	}
	out, err := dec.Process(ctx, mid[0])
	if err != nil {
		t.Fatal(err)
	}
	want := tbl{Cols: []string{"ts int64", "reading float64", "device utf8"}, Rows: [][]any{{int64(5), 0.0, "a"}, {int64(0), 0.0, "b"}}}
	if diff := cmp.Diff(want, dump(t, out[0].Table)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	_ = arrow.BinaryTypes.Binary
}
