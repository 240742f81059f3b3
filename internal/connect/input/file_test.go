package input

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/message"
)

func TestFileExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindInput, "file")
	in := build(t, "file", conf)
	ctx := testCtx(t)
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
	if got, _ := drain(t, ctx, in, 10); len(got) != 0 {
		t.Errorf("example read %q from /dev/null", got)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFileFormats(t *testing.T) {
	tests := []struct {
		name    string
		format  string
		content string
		want    []string
	}{
		{"lines", "lines", "a\nb\r\n\nlast", []string{"a", "b", "", "last"}},
		{"lines empty file", "lines", "", nil},
		{"json skips invalid and blank", "json", "{\"a\":1}\nnot json\n\n[1,2]\n\"s\"\n", []string{`{"a":1}`, `[1,2]`, `"s"`}},
		{"csv", "csv", "name,age\nada,36\n\"lovelace, a\",\"3\"\"6\"\nshort\n\ntom,5", []string{
			`{"name":"ada","age":"36"}`,
			`{"name":"lovelace, a","age":"3\"6"}`,
			`{"name":"tom","age":"5"}`,
		}},
		{"csv header only", "csv", "a,b\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := build(t, "file", map[string]any{"path": writeFile(t, tt.content), "format": tt.format, "batch_size": float64(2)})
			ctx := testCtx(t)
			if err := in.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			defer in.Close(ctx)
			got, sizes := drain(t, ctx, in, 20)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for _, s := range sizes {
				if s < 1 || s > 2 {
					t.Errorf("batch of %d, want 1..2", s)
				}
			}
		})
	}
}

func TestFileMetadata(t *testing.T) {
	p := writeFile(t, "ab\ncd\n")
	in := build(t, "file", map[string]any{"path": p, "batch_size": float64(5)})
	ctx := testCtx(t)
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
	b, _, err := in.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, m := range b.Messages {
		if m.Meta.Source != p {
			t.Errorf("source %q, want %q", m.Meta.Source, p)
		}
		offs = append(offs, m.Meta.Offset)
	}
	if diff := cmp.Diff([]int64{0, 3}, offs); diff != "" {
		t.Errorf("offsets (-want +got):\n%s", diff)
	}
}

func TestFileMissing(t *testing.T) {
	in := build(t, "file", map[string]any{"path": filepath.Join(t.TempDir(), "nope")})
	if err := in.Connect(testCtx(t)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Connect = %v, want not exist", err)
	}
	_ = in.Close(testCtx(t))
}

func TestFileRedeliversFailedBatch(t *testing.T) {
	in := build(t, "file", map[string]any{"path": writeFile(t, "a\nb\n")})
	ctx := testCtx(t)
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
	_, ack, err := in.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = ack(ctx, errors.New("failed"))
	got, _ := drain(t, ctx, in, 10)
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// readN reads until n payloads arrived, bounded by the context.
func readN(t *testing.T, ctx context.Context, in component.Input, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		b, ack, err := in.Read(ctx)
		if err != nil {
			t.Fatalf("Read after %q: %v", got, err)
		}
		got = append(got, payloadsOf(t, b)...)
		_ = ack(ctx, nil)
	}
	return got
}

func TestFileFollow(t *testing.T) {
	p := writeFile(t, "h1,h2\n1,2\n")
	in := build(t, "file", map[string]any{"path": p, "format": "csv", "follow": true, "poll_interval": "5ms", "batch_size": float64(10)})
	ctx := testCtx(t)
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
	if diff := cmp.Diff([]string{`{"h1":"1","h2":"2"}`}, readN(t, ctx, in, 1)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}

	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make(chan []string, 1)
	go func() {
		// A Read in progress sees the appended lines; the half line waits
		// for its newline.
		var out []string
		for len(out) < 2 {
			b, _, err := in.Read(ctx)
			if err != nil {
				break
			}
			for i := range b.Messages {
				pl, _ := b.Messages[i].Payload()
				out = append(out, string(pl))
			}
		}
		got <- out
	}()
	for _, chunk := range []string{"3,4\n5,", "6\n"} {
		if _, err := f.WriteString(chunk); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{`{"h1":"3","h2":"4"}`, `{"h1":"5","h2":"6"}`}
	if diff := cmp.Diff(want, <-got); diff != "" {
		t.Errorf("appended rows (-want +got):\n%s", diff)
	}

	// A truncated file is read again from its beginning (header first).
	if err := os.WriteFile(p, []byte("x\n9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`{"x":"9"}`}, readN(t, ctx, in, 1)); diff != "" {
		t.Errorf("after truncation (-want +got):\n%s", diff)
	}
}

func TestFileFollowStops(t *testing.T) {
	in := build(t, "file", map[string]any{"path": writeFile(t, ""), "follow": true, "poll_interval": "1h"})
	ctx := testCtx(t)
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, _, err := in.Read(ctx); errc <- err }()
	if err := in.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, errInputClosed) {
		t.Errorf("Read after Close = %v, want errInputClosed", err)
	}

	in2 := build(t, "file", map[string]any{"path": writeFile(t, ""), "follow": true, "poll_interval": "1h"})
	cctx, cancel := context.WithCancel(ctx)
	if err := in2.Connect(cctx); err != nil {
		t.Fatal(err)
	}
	defer in2.Close(ctx)
	time.AfterFunc(time.Millisecond, cancel)
	if _, _, err := in2.Read(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Read after cancel = %v, want context.Canceled", err)
	}
	if _, _, err := in2.Read(cctx); errors.Is(err, message.ErrEndOfInput) {
		t.Error("a followed file ended")
	}
}

func TestFileConfigErrors(t *testing.T) {
	for name, conf := range map[string]map[string]any{
		"missing path":  {},
		"bad format":    {"path": "x", "format": "xml"},
		"zero poll":     {"path": "x", "poll_interval": "0s"},
		"bad poll":      {"path": "x", "poll_interval": "often"},
		"zero batch":    {"path": "x", "batch_size": float64(0)},
		"unknown field": {"path": "x", "codec": "lines"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := component.Default.NewInput("file", conf, component.Resources{}); err == nil {
				t.Error("built without error")
			}
		})
	}
}

func TestFileSeek(t *testing.T) {
	tests := []struct {
		format, content string
	}{
		{"lines", "a\nb\r\n\nc\nlast"},
		{"json", "{\"a\":1}\nnot json\n\n[1,2]\n\"s\"\n"},
		{"csv", "name,age\nada,36\nbad\nbob,7\ntom,5\n"},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			p := writeFile(t, tt.content)
			conf := map[string]any{"path": p, "format": tt.format, "batch_size": float64(1)}
			ctx := testCtx(t)
			open := func() component.Input {
				in := build(t, "file", conf)
				if err := in.Connect(ctx); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = in.Close(ctx) })
				return in
			}
			all, _ := drain(t, ctx, open(), 100)
			if len(all) < 2 {
				t.Fatalf("only %d messages", len(all))
			}
			in := open()
			var positions [][]byte
			for k := 0; ; k++ {
				pos, err := in.(component.Replayable).Position()
				if err != nil {
					t.Fatal(err)
				}
				positions = append(positions, pos)
				_, _, err = in.Read(ctx)
				if errors.Is(err, message.ErrEndOfInput) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if k > len(all) {
					t.Fatal("more batches than messages")
				}
			}
			if len(positions) != len(all)+1 {
				t.Fatalf("%d positions for %d messages", len(positions), len(all))
			}
			for k, pos := range positions {
				again := open()
				if err := again.(component.Replayable).Seek(ctx, pos); err != nil {
					t.Fatal(err)
				}
				tail, _ := drain(t, ctx, again, 100)
				if diff := cmp.Diff(all[k:], tail, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("Seek(%s) (-want +got):\n%s", pos, diff)
				}
			}
		})
	}
}

func TestFileSeekErrors(t *testing.T) {
	ctx := testCtx(t)
	in := build(t, "file", map[string]any{"path": writeFile(t, "abc\n")})
	if err := in.(component.Replayable).Seek(ctx, []byte(`{"offset":0}`)); err == nil {
		t.Error("Seek before Connect succeeded")
	}
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
	for _, pos := range []string{`x`, `{"offset":-1}`, `{"offset":5}`} {
		if err := in.(component.Replayable).Seek(ctx, []byte(pos)); err == nil {
			t.Errorf("Seek(%s) succeeded", pos)
		}
	}
}
