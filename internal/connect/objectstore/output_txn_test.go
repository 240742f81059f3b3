package objectstore

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
)

// TestOutputTransactional: nothing is visible before Commit, Commit is
// idempotent, and Begin after a crash commits the restored transaction
// and discards what was written after it.
func TestOutputTransactional(t *testing.T) {
	s := newS3Server(t)
	s.Start()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, url string
		objects   func() map[string][]byte
	}{
		{"file", "file://" + dir, func() map[string][]byte { return fileObjects(t, dir) }},
		{"s3", s.url("txn"), func() map[string][]byte { return trimKeys(s.objects("txn/"), "txn/") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			open := func() *Output {
				o, err := NewOutput(map[string]any{"url": tc.url, "path": "out/{{uuid}}.jsonl"}, component.Resources{})
				if err != nil {
					t.Fatal(err)
				}
				if err := o.Connect(ctx); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = o.Close(ctx) })
				return o.(*Output)
			}
			visible := func() []string {
				var got []string
				for k, v := range tc.objects() {
					if !strings.HasPrefix(k, pendingDir) {
						got = append(got, lines(string(v))...)
					}
				}
				slices.Sort(got)
				return got
			}
			pending := func() int {
				n := 0
				for k := range tc.objects() {
					if strings.HasPrefix(k, pendingDir) {
						n++
					}
				}
				return n
			}
			o := open()
			if err := o.Begin(ctx, "sink", 0, nil); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"1", "2"} {
				if err := o.Write(ctx, batchOf(p)); err != nil {
					t.Fatal(err)
				}
			}
			txn1, err := o.Prepare(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := visible(); len(got) != 0 {
				t.Errorf("visible before commit: %q", got)
			}
			for range 2 { // again is a no-op
				if err := o.Commit(ctx, txn1); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff([]string{"1", "2"}, visible()); diff != "" {
				t.Errorf("after commit (-want +got):\n%s", diff)
			}
			if err := o.Write(ctx, batchOf("3")); err != nil {
				t.Fatal(err)
			}
			txn2, err := o.Prepare(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := o.Write(ctx, batchOf("4")); err != nil { // after the last checkpoint: replayed
				t.Fatal(err)
			}
			// The process dies; a new one restores checkpoint 2.
			o2 := open()
			if err := o2.Begin(ctx, "sink", 0, [][]byte{txn2}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"1", "2", "3"}, visible()); diff != "" {
				t.Errorf("after restore (-want +got):\n%s", diff)
			}
			if n := pending(); n != 0 {
				t.Errorf("%d pending objects left", n)
			}
			empty, err := o2.Prepare(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			if err := o2.Commit(ctx, empty); err != nil {
				t.Errorf("empty transaction: %v", err)
			}
			if err := o2.Begin(ctx, "a/b", 0, nil); err == nil {
				t.Error("Begin accepted an operator id with a slash")
			}
		})
	}
}

func trimKeys(m map[string][]byte, prefix string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range m {
		out[strings.TrimPrefix(k, prefix)] = v
	}
	return out
}
