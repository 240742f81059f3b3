package componenttest

import (
	"context"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/secretref"
)

// Materialize loads doc (a YAML node configuration) as `flowplane
// --validate` does, with the components registered in component.Default:
// its error is the path-named message a user sees.
func Materialize(doc string) (*config.Config, error) {
	return config.Materialize([]byte(doc), config.YAML, component.Default, secretref.Resolver{})
}

// Engine starts an engine running doc, a YAML node configuration, with its
// state under a temporary directory; it is shut down when the test ends.
// Watch it with e.Streams(), e.Ready() and e.NotReady().
func Engine(t testing.TB, doc string) *engine.Engine {
	t.Helper()
	cfg, err := Materialize(doc)
	if err != nil {
		t.Fatalf("configuration: %v", err)
	}
	e := engine.New(engine.Options{StateDir: t.TempDir(), StopTimeout: 10 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		e.Shutdown(ctx)
	})
	if err := e.Apply(context.Background(), cfg); err != nil {
		t.Fatalf("apply: %v", err)
	}
	return e
}

// Stream returns the status of the stream id of e.
func Stream(t testing.TB, e *engine.Engine, id string) engine.StreamStatus {
	t.Helper()
	for _, s := range e.Streams() {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no stream %q", id)
	return engine.StreamStatus{}
}

// WaitFor polls cond every 10ms until it holds, failing the test after
// within. The bound only keeps a broken component from hanging the test;
// it is not a timing assertion.
func WaitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
