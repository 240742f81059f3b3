package objectstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/policy"
)

// TestFilePolicyAtUse: a Hub-delivered file:// object store (built with
// the remote policy's FS) writes beneath the allowed root; one whose
// bucket directory sits under a link out of the root is refused at
// Connect, naming the path and the rule, with nothing made outside.
func TestFilePolicyAtUse(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	res := component.Resources{StreamID: "s1", FS: policy.Default(root).FS()}
	write := func(url string) error {
		o, err := NewOutput(map[string]any{"url": url, "path": "{{count}}.json"}, res)
		if err != nil {
			t.Fatal(err)
		}
		ctx := testCtx(t)
		defer o.Close(ctx)
		if err := o.Connect(ctx); err != nil {
			return err
		}
		return o.Write(ctx, batchOf(`{"a":1}`))
	}
	if err := write("file://" + root + "/objects"); err != nil {
		t.Fatalf("beneath the root: %v", err)
	}
	if len(fileObjects(t, root)) != 1 {
		t.Errorf("objects beneath the root: %v", fileObjects(t, root))
	}
	if err := os.Symlink(outside, filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	err := write("file://" + root + "/linked/objects")
	if !errors.Is(err, policy.ErrDenied) || !strings.Contains(err.Error(), policy.RuleFileRoots) {
		t.Fatalf("through a link out of the root: %v, want refused", err)
	}
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Fatalf("made %v outside the root", es)
	}
}
