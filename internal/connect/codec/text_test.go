package codec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func TestLinesDecode(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"lf", []string{"a\nb\nc"}, []string{"a", "b", "c"}},
		{"final newline dropped", []string{"a\nb\n"}, []string{"a", "b"}},
		{"crlf", []string{"a\r\nb\r\n"}, []string{"a", "b"}},
		{"empty lines inside kept", []string{"a\n\nb"}, []string{"a", "", "b"}},
		{"lone cr kept", []string{"a\rb"}, []string{"a\rb"}},
		{"empty payload", []string{""}, nil},
		{"several payloads", []string{"a\nb", "c"}, []string{"a", "b", "c"}},
		{"just a newline", []string{"\n"}, []string{""}},
	}
	c := newCodec(t, "lines", nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.Decode(ctx, msgs(tt.in...))
			if err != nil {
				t.Fatal(err)
			}
			got := payloadStrings(t, out)
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestLinesKeepsMetadata(t *testing.T) {
	m := message.New([]byte("a\nb"))
	m.Meta.Source = "in"
	m.Meta.Offset = 7
	m.SetMeta("k", "v")
	out, err := newCodec(t, "lines", nil).Decode(ctx, message.Batch{Messages: []message.Message{m}})
	if err != nil {
		t.Fatal(err)
	}
	out.Messages[0].SetMeta("k", "changed")
	for i, want := range []string{"changed", "v"} {
		got := out.Messages[i].Meta
		if got.Source != "in" || got.Offset != 7 || got.Fields["k"] != want {
			t.Errorf("message %d metadata %+v", i, got)
		}
	}
}

func TestLinesEncodePassesMessages(t *testing.T) {
	out, err := newCodec(t, "lines", nil).Encode(ctx, msgs("a", "b\nc"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b\nc"}, payloadStrings(t, out)); diff != "" {
		t.Error(diff)
	}
}

func TestCSVDecode(t *testing.T) {
	tests := []struct {
		name string
		conf map[string]any
		in   []string
		want tbl
	}{
		{
			name: "header, inferred types",
			in:   []string{"id,price,ok,name\n1,2.5,true,a\n2,3,false,\"b,c\"\n"},
			want: tbl{
				Cols: []string{"id int64", "price float64", "ok bool", "name utf8"},
				Rows: [][]any{{int64(1), 2.5, true, "a"}, {int64(2), 3.0, false, "b,c"}},
			},
		},
		{
			name: "empty cells are null in typed columns, empty in text",
			in:   []string{"id,name\n,\n3,x\n"},
			want: tbl{Cols: []string{"id int64", "name utf8"}, Rows: [][]any{{nil, ""}, {int64(3), "x"}}},
		},
		{
			name: "one bad value makes a column text",
			in:   []string{"id\n1\n", "id\nx\n"},
			want: tbl{Cols: []string{"id utf8"}, Rows: [][]any{{"1"}, {"x"}}},
		},
		{
			name: "payloads with different headers share columns by name",
			in:   []string{"a,b\n1,2\n", "b,c\n3,4\n"},
			want: tbl{
				Cols: []string{"a int64", "b int64", "c int64"},
				Rows: [][]any{{int64(1), int64(2), nil}, {nil, int64(3), int64(4)}},
			},
		},
		{
			name: "short records are null in the rest",
			in:   []string{"a,b\n1\n"},
			want: tbl{Cols: []string{"a int64", "b utf8"}, Rows: [][]any{{int64(1), nil}}},
		},
		{
			name: "no header, delimiter",
			conf: map[string]any{"header": false, "delimiter": ";"},
			in:   []string{"x;1\ny;2;z\r\n"},
			want: tbl{
				Cols: []string{"column_1 utf8", "column_2 int64", "column_3 utf8"},
				Rows: [][]any{{"x", int64(1), nil}, {"y", int64(2), "z"}},
			},
		},
		{
			name: "tab",
			conf: map[string]any{"delimiter": "\t"},
			in:   []string{"a\tb\n1.5\tno\n"},
			want: tbl{Cols: []string{"a float64", "b utf8"}, Rows: [][]any{{1.5, "no"}}},
		},
		{
			name: "header only",
			in:   []string{"a,b\n"},
			want: tbl{Cols: []string{"a utf8", "b utf8"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := newCodec(t, "csv", tt.conf).Decode(ctx, msgs(tt.in...))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, dump(t, out.Table)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestCSVErrors(t *testing.T) {
	tests := []struct {
		name string
		conf map[string]any
		in   string
		want string
	}{
		{"long delimiter", map[string]any{"delimiter": ";;"}, "", `delimiter: want one character other than a quote or line end, got ";;"`},
		{"empty delimiter", map[string]any{"delimiter": ""}, "", `delimiter: want one character`},
		{"quote delimiter", map[string]any{"delimiter": `"`}, "", `delimiter: want one character`},
		{"unknown field", map[string]any{"quote": "'"}, "", `unknown field "quote"`},
		{"record longer than header", nil, "a\n1,2\n", "payload 0: record with 2 fields, the header names 1"},
		{"duplicate header", nil, "a,a\n1,2\n", `payload 0: column "a" named twice in the header`},
		{"bad quotes", nil, "a\n\"x\n", `payload 0: parse error on line 2, column 4: extraneous or missing " in quoted-field`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewCSV(orEmpty(tt.conf), component.Resources{})
			if err == nil {
				_, err = c.Decode(ctx, msgs(tt.in))
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}
