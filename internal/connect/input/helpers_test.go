package input

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

// testCtx bounds a test's blocking calls.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func build(t *testing.T, name string, conf map[string]any) component.Input {
	t.Helper()
	in, err := component.Default.NewInput(name, conf, component.Resources{})
	if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	return in
}

// drain reads batches until message.ErrEndOfInput (at most max reads),
// acknowledging each with nil, and returns the payloads and batch sizes.
func drain(t *testing.T, ctx context.Context, in component.Input, max int) (payloads []string, sizes []int) {
	t.Helper()
	for range max {
		b, ack, err := in.Read(ctx)
		if errors.Is(err, message.ErrEndOfInput) {
			return payloads, sizes
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		sizes = append(sizes, b.Len())
		for i := range b.Messages {
			p, err := b.Messages[i].Payload()
			if err != nil {
				t.Fatal(err)
			}
			payloads = append(payloads, string(p))
		}
		if err := ack(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("no end of input after %d reads", max)
	return nil, nil
}

func payloadsOf(t *testing.T, b message.Batch) []string {
	t.Helper()
	var out []string
	for i := range b.Messages {
		p, err := b.Messages[i].Payload()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(p))
	}
	return out
}
