package policy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/flowplane/flowplane/internal/sandbox"
)

// TestWithin: paths beneath a root are allowed; outside, through .. or
// through a symbolic link (escaping or dangling) they are refused.
func TestWithin(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "data", "sub"), 0o700))
	must(os.WriteFile(filepath.Join(root, "data", "in.txt"), []byte("x"), 0o600))
	must(os.WriteFile(filepath.Join(outside, "authorized_keys"), []byte("k"), 0o600))
	must(os.Symlink(outside, filepath.Join(root, "out-dir")))
	must(os.Symlink(filepath.Join(outside, "authorized_keys"), filepath.Join(root, "keys")))
	must(os.Symlink(filepath.Join(outside, "missing", "new"), filepath.Join(root, "dangling")))
	must(os.Symlink("data", filepath.Join(root, "inner")))
	must(os.Symlink(filepath.Join(root, "data"), filepath.Join(root, "absolute")))
	roots := []string{root}
	tests := []struct {
		name string
		path string
		want error // nil: allowed
	}{
		{"existing file", filepath.Join(root, "data", "in.txt"), nil},
		{"new file in an existing directory", filepath.Join(root, "data", "out.txt"), nil},
		{"new file in new directories", filepath.Join(root, "a", "b", "c.txt"), nil},
		{"the root itself", root, nil},
		{"a link that stays inside", filepath.Join(root, "inner", "in.txt"), nil},
		{"an absolute link, even to inside (os.Root's rule)", filepath.Join(root, "absolute", "in.txt"), ErrEscapes},
		{"dot-dot under a missing directory, staying inside", root + "/nope/../data/in.txt", ErrEscapes},
		{"outside", "/etc/passwd", ErrOutsideRoots},
		{"a sibling directory", outside, ErrOutsideRoots},
		{"a prefix that is not a directory boundary", root + "x/file", ErrOutsideRoots},
		{"dot-dot out of the root", filepath.Join(root) + "/data/../../" + filepath.Base(outside) + "/authorized_keys", ErrOutsideRoots},
		{"dot-dot under a missing directory", root + "/nope/../../etc/passwd", ErrOutsideRoots},
		{"dot-dot after a link", root + "/out-dir/../x", ErrEscapes},
		{"a linked directory", filepath.Join(root, "out-dir", "authorized_keys"), ErrEscapes},
		{"a new file under a linked directory", filepath.Join(root, "out-dir", "new"), ErrEscapes},
		{"a linked file", filepath.Join(root, "keys"), ErrEscapes},
		{"a dangling link", filepath.Join(root, "dangling"), ErrEscapes},
		{"empty", "", ErrOutsideRoots},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Within(roots, tt.path)
			switch {
			case tt.want == nil && err != nil:
				t.Errorf("Within(%q) = %v, want allowed", tt.path, err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Errorf("Within(%q) = %v, want %v", tt.path, err, tt.want)
			}
		})
	}
}

// TestWithinRelative: a relative path is taken from the working
// directory.
func TestWithinRelative(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	if err := Within([]string{root}, "out/file.txt"); err != nil {
		t.Errorf("relative path under the working directory: %v", err)
	}
	if err := Within([]string{root}, "../x"); !errors.Is(err, ErrOutsideRoots) {
		t.Errorf("relative path out of it: %v", err)
	}
}

// TestWithinMissingRoot: beneath a root not made yet, a path is allowed
// as written, without "..".
func TestWithinMissingRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "not-yet")
	if err := Within([]string{root}, filepath.Join(root, "out", "x.jsonl")); err != nil {
		t.Errorf("beneath a missing root: %v", err)
	}
	if err := Within([]string{root}, root+"/a/../b"); !errors.Is(err, ErrEscapes) {
		t.Error("dot-dot beneath a missing root allowed")
	}
}

// TestWithinNoRoots: without roots nothing is allowed.
func TestWithinNoRoots(t *testing.T) {
	if err := Within(nil, t.TempDir()); !errors.Is(err, ErrOutsideRoots) {
		t.Errorf("Within(nil, dir) = %v", err)
	}
}

// FuzzWithin: whatever the path, an allowed one resolves, cleaned, beneath
// the root; the check never panics.
func FuzzWithin(f *testing.F) {
	root := f.TempDir()
	if err := os.Symlink("/", filepath.Join(root, "up")); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"a", "../a", "up/etc", "a/../../b", "./a//b", "", "/", "a/./../up/x", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		name := root + "/" + rel
		if Within([]string{root}, name) != nil {
			return
		}
		if !beneath(root, filepath.Clean(name)) {
			t.Errorf("allowed %q, lexically outside the root", name)
		}
		real, err := filepath.EvalSymlinks(filepath.Join(root, "up"))
		if err == nil && real == "/" && filepath.Clean(name) != filepath.Join(root, "up") && beneath(filepath.Join(root, "up"), filepath.Clean(name)) {
			t.Errorf("allowed %q, through a link to /", name)
		}
	})
}

func beneath(root, name string) bool {
	_, ok := sandbox.Beneath(root, name)
	return ok
}
