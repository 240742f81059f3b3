package output

import (
	"context"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func build(t *testing.T, name string, conf map[string]any) component.Output {
	t.Helper()
	out, err := component.Default.NewOutput(name, conf, component.Resources{})
	if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	return out
}

func batch(payloads ...string) message.Batch {
	b := message.Batch{}
	for _, p := range payloads {
		b.Messages = append(b.Messages, message.New([]byte(p)))
	}
	return b
}
