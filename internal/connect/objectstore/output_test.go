package objectstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func batchOf(ps ...string) message.Batch {
	var b message.Batch
	for _, p := range ps {
		b.Messages = append(b.Messages, message.New([]byte(p)))
	}
	return b
}

func TestOutputWritesObjects(t *testing.T) {
	dir := t.TempDir()
	o, err := NewOutput(map[string]any{"url": "file://" + dir + "/nested", "path": "{{stream}}/{{count}}.json", "codec": "json_array"},
		component.Resources{StreamID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := o.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	for _, b := range []message.Batch{batchOf(`{"a":1}`, "not json"), {}, batchOf("[2]")} {
		if err := o.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for k, v := range fileObjects(t, dir) {
		got[k] = string(v)
	}
	want := map[string]string{ // the empty batch writes nothing
		"nested/s1/1.json": "[{\"a\":1},\"not json\"]\n",
		"nested/s1/2.json": "[[2]]\n",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestOutputGzipSuffix(t *testing.T) {
	o, err := NewOutput(map[string]any{"url": "file:///x", "path": "{{uuid}}.jsonl", "compression": "gzip"}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	if key := o.(*Output).path.render(1, time.Now(), ""); !strings.HasSuffix(key, ".jsonl.gz") {
		t.Errorf("key %q, want the .gz suffix added", key)
	}
}

// TestOutputServerDown: Connect fails with the reason when nothing
// listens, and a Write while the server is gone fails rather than
// claiming the batch.
func TestOutputServerDown(t *testing.T) {
	s := newS3Server(t)
	o, err := NewOutput(map[string]any{"url": s.url("p")}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	err = o.Connect(ctx)
	if err == nil || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "region=") {
		t.Fatalf("Connect = %v, want connection refused without the URL's query", err)
	}
	s.Start()
	if err := o.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	if err := o.Write(ctx, batchOf("1")); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if err := o.Write(ctx, batchOf("2")); err == nil {
		t.Fatal("Write succeeded with the server down")
	}
	s.Start()
	if err := o.Write(ctx, batchOf("2")); err != nil {
		t.Fatal(err)
	}
	if n := len(s.objects("p/")); n != 2 {
		t.Errorf("%d objects, want 2", n)
	}
}

func TestOutputMissingBucket(t *testing.T) {
	s := newS3Server(t)
	s.Start()
	o, _ := NewOutput(map[string]any{"url": strings.Replace(s.url("p"), testBucket, "nobucket", 1)}, component.Resources{})
	if err := o.Connect(testCtx(t)); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Connect = %v, want the bucket does not exist", err)
	}
}
