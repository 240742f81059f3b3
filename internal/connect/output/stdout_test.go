package output

import (
	"bytes"
	"errors"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/message"
)

func TestStdoutExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindOutput, "stdout")
	out := build(t, "stdout", conf).(*Stdout)
	var buf bytes.Buffer
	out.out = &buf
	out.w.Reset(&buf)
	ctx := testCtx(t)
	if err := out.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := out.Write(ctx, batch(`{"a":1}`, `{"a":2}`)); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "{\"a\":1}\n{\"a\":2}\n"; got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
}

func TestStdoutWrite(t *testing.T) {
	structured := message.NewStructured(map[string]any{"k": "v"})
	tests := []struct {
		name    string
		conf    map[string]any
		batches []message.Batch
		want    string
	}{
		{"newline", map[string]any{}, []message.Batch{batch("a", "b"), batch("c")}, "a\nb\nc\n"},
		{"no newline", map[string]any{"append_newline": false}, []message.Batch{batch("a", "b")}, "ab"},
		{"structured", map[string]any{}, []message.Batch{{Messages: []message.Message{structured}}}, "{\"k\":\"v\"}\n"},
		{"empty batch", map[string]any{}, []message.Batch{{}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			out, err := newStdout(tt.conf, &buf)
			if err != nil {
				t.Fatal(err)
			}
			ctx := testCtx(t)
			for _, b := range tt.batches {
				if err := out.Write(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			// Flushed at the end of each batch, before Close.
			if got := buf.String(); got != tt.want {
				t.Errorf("wrote %q, want %q", got, tt.want)
			}
		})
	}
}

// failOnce fails its first write, then writes to buf.
type failOnce struct {
	failed bool
	buf    bytes.Buffer
}

var errDisk = errors.New("disk full")

func (f *failOnce) Write(p []byte) (int, error) {
	if !f.failed {
		f.failed = true
		return 0, errDisk
	}
	return f.buf.Write(p)
}

func TestStdoutRecoversAfterError(t *testing.T) {
	w := &failOnce{}
	out, err := newStdout(map[string]any{}, w)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := out.Write(ctx, batch("a")); !errors.Is(err, errDisk) {
		t.Fatalf("Write = %v, want %v", err, errDisk)
	}
	if err := out.Write(ctx, batch("a")); err != nil {
		t.Fatalf("retried Write = %v", err)
	}
	if got := w.buf.String(); got != "a\n" {
		t.Errorf("wrote %q, want %q", got, "a\n")
	}
}

func TestDropExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindOutput, "drop")
	out := build(t, "drop", conf)
	ctx := testCtx(t)
	if err := out.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := out.Write(ctx, batch("a", "b")); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := component.Default.NewOutput("drop", map[string]any{"x": 1.0}, component.Resources{}); err == nil {
		t.Error("drop accepted an unknown field")
	}
}

func TestStdoutConfigErrors(t *testing.T) {
	if _, err := component.Default.NewOutput("stdout", map[string]any{"newline": true}, component.Resources{}); err == nil {
		t.Error("stdout accepted an unknown field")
	}
}
