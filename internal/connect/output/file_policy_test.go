package output

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/policy"
)

// TestFilePolicyAtUse: the file output of Hub-delivered work (built with
// the remote policy's FS) whose path passed the policy when the work
// arrived, and whose parent directory became a symbolic link to outside
// the root afterwards, is refused when it opens the file, in a stream and
// in a job; nothing is written outside. Built as local work, the same
// output follows the link: local configurations are the owner's.
func TestFilePolicyAtUse(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(out component.Output) error
	}{
		{"stream", func(out component.Output) error { return out.Connect(testCtx(t)) }},
		{"job", func(out component.Output) error {
			if err := out.Connect(testCtx(t)); err != nil {
				return err
			}
			return out.(component.Transactional).Begin(testCtx(t), "sink", 0, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, outside := t.TempDir(), t.TempDir()
			dir := filepath.Join(root, "out")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "authorized_keys")
			pol := policy.Default(root)
			if err := policy.Within(pol.Roots(), path); err != nil {
				t.Fatalf("the arrival check refused %s: %v", path, err)
			}
			// After the check, someone who can write beneath the root
			// swaps the directory for a link out of it.
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, dir); err != nil {
				t.Fatal(err)
			}
			conf := map[string]any{"path": path}

			remote, err := component.Default.NewOutput("file", conf, component.Resources{FS: pol.FS()})
			if err != nil {
				t.Fatal(err)
			}
			err = tc.open(remote)
			_ = remote.Close(testCtx(t))
			if !errors.Is(err, policy.ErrDenied) {
				t.Fatalf("open through a swapped directory = %v, want refused by the policy", err)
			}
			if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, policy.RuleFileRoots) {
				t.Errorf("refusal %q does not name the path and the rule", msg)
			}
			if es, _ := os.ReadDir(outside); len(es) != 0 {
				t.Fatalf("Hub-delivered work wrote %v outside its root", es)
			}

			local := build(t, "file", conf)
			if err := tc.open(local); err != nil {
				t.Fatalf("local work through the same link: %v", err)
			}
			mustWrite(t, local, batch("k"))
			if err := local.Close(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			if es, _ := os.ReadDir(outside); len(es) == 0 {
				t.Error("local work did not write through the link")
			}
		})
	}
}
