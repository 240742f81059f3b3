package input

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
)

func TestStdinExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindInput, "stdin")
	in := build(t, "stdin", conf).(*Stdin)
	in.in = strings.NewReader("one\ntwo\n")
	ctx := testCtx(t)
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
	got, _ := drain(t, ctx, in, 10)
	if diff := cmp.Diff([]string{"one", "two"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestStdinLines(t *testing.T) {
	tests := []struct {
		name      string
		input     string
		batchSize int
		want      []string
	}{
		{"empty", "", 1, nil},
		{"crlf and no final newline", "a\r\nb\nc", 1, []string{"a", "b", "c"}},
		{"empty line kept", "a\n\nb\n", 1, []string{"a", "", "b"}},
		{"batched", "1\n2\n3\n4\n5\n", 3, []string{"1", "2", "3", "4", "5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := newStdin(map[string]any{"batch_size": float64(tt.batchSize)}, component.Resources{}, strings.NewReader(tt.input))
			if err != nil {
				t.Fatal(err)
			}
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
				if s < 1 || s > tt.batchSize {
					t.Errorf("batch of %d messages, want 1..%d", s, tt.batchSize)
				}
			}
		})
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestStdinReadError(t *testing.T) {
	boom := errors.New("boom")
	in, err := newStdin(map[string]any{}, component.Resources{}, io.MultiReader(strings.NewReader("a\n"), failingReader{boom}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
	b, _, err := in.Read(ctx)
	if err != nil || b.Len() != 1 {
		t.Fatalf("first Read = %d messages, %v", b.Len(), err)
	}
	if _, _, err := in.Read(ctx); !errors.Is(err, boom) {
		t.Errorf("Read after a read error = %v, want %v", err, boom)
	}
}

// Close unblocks a Read waiting for a line that never comes.
func TestStdinClose(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	in, err := newStdin(map[string]any{}, component.Resources{}, pr)
	if err != nil {
		t.Fatal(err)
	}
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
}
