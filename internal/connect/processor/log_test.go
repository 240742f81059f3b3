package processor_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func TestLog(t *testing.T) {
	tests := []struct {
		name    string
		conf    map[string]any
		handler slog.Level // lowest level the handler records
		want    string     // the log output, without times
	}{
		{"payload by default", map[string]any{}, slog.LevelInfo,
			"level=INFO msg=\"{\\\"id\\\": 1}\" processor=log\nlevel=INFO msg=\"{\\\"id\\\": 2}\" processor=log\n"},
		{"expression", map[string]any{"level": "warn", "message": `"id " + string(this.id)`}, slog.LevelInfo,
			"level=WARN msg=\"id 1\" processor=log\nlevel=WARN msg=\"id 2\" processor=log\n"},
		{"non-string result as JSON", map[string]any{"level": "error", "message": `{"x": this.id}`}, slog.LevelInfo,
			"level=ERROR msg=\"{\\\"x\\\":1}\" processor=log\nlevel=ERROR msg=\"{\\\"x\\\":2}\" processor=log\n"},
		{"level below the handler's", map[string]any{"level": "debug"}, slog.LevelInfo, ""},
		{"debug recorded", map[string]any{"level": "debug", "message": `"d"`}, slog.LevelDebug,
			"level=DEBUG msg=d processor=log\nlevel=DEBUG msg=d processor=log\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := slog.NewTextHandler(&buf, &slog.HandlerOptions{
				Level: tt.handler,
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				},
			})
			p, err := component.Default.NewProcessor("log", tt.conf, component.Resources{Logger: slog.New(h)})
			if err != nil {
				t.Fatal(err)
			}
			in := batchOf(`{"id": 1}`, `{"id": 2}`)
			out, err := p.Process(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, buf.String()); diff != "" {
				t.Errorf("log output (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{`{"id": 1}`, `{"id": 2}`}, payloadsOf(t, out)); diff != "" {
				t.Errorf("batch changed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLogErrors(t *testing.T) {
	if _, err := component.Default.NewProcessor("log", map[string]any{"level": "trace"}, component.Resources{}); err == nil ||
		!strings.Contains(err.Error(), `level: "trace"`) {
		t.Errorf("level trace: error = %v", err)
	}
	h := slog.NewTextHandler(&bytes.Buffer{}, nil)
	p, err := component.Default.NewProcessor("log", map[string]any{"message": `this.a.b`}, component.Resources{Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Process(context.Background(), message.Batch{Messages: []message.Message{message.New([]byte(`{"a": 1}`))}})
	if err == nil || !strings.Contains(err.Error(), "log: message 0:") {
		t.Errorf("error = %v, want an evaluation error for message 0", err)
	}
}
