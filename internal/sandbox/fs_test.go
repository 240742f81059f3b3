package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const rule = "remote_policy.file_roots"

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestFSSwappedDirectory: a directory that was plain when the path was
// checked and is a symbolic link to outside the root when a component
// opens the file is refused at the open, and nothing is made outside; the
// unconfined FS follows the link as the host does.
func TestFSSwappedDirectory(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "out")
	must(t, os.Mkdir(dir, 0o700))
	name := filepath.Join(dir, "authorized_keys")
	// The swap: what was checked as a directory is now a link out.
	must(t, os.Remove(dir))
	must(t, os.Symlink(outside, dir))

	f := Confine([]string{root}, rule)
	for op, use := range map[string]func() error{
		"open": func() error {
			fh, err := f.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err == nil {
				fh.Close()
			}
			return err
		},
		"mkdir":  func() error { return f.MkdirAll(filepath.Join(dir, "sub"), 0o700) },
		"read":   func() error { _, err := f.ReadFile(name); return err },
		"stat":   func() error { _, err := f.Stat(name); return err },
		"remove": func() error { return f.Remove(name) },
	} {
		err := use()
		var se *Error
		if !errors.As(err, &se) || !errors.Is(err, ErrDenied) {
			t.Fatalf("%s through a swapped directory: %v, want a refusal", op, err)
		}
		if se.Path != name && !strings.HasPrefix(se.Path, dir) || se.Rule != rule || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("%s: refusal %q does not name the path and the rule", op, err)
		}
	}
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Errorf("the confined FS made %v outside its root", es)
	}

	fh, err := FS{}.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatalf("the unconfined FS: %v", err)
	}
	fh.Close()
	if _, err := os.Stat(filepath.Join(outside, "authorized_keys")); err != nil {
		t.Errorf("the unconfined FS did not follow the link: %v", err)
	}
}

// TestFS: within a root every operation works as the os package's; a
// path outside every root is refused before anything is touched.
func TestFS(t *testing.T) {
	root, other := t.TempDir(), t.TempDir()
	f := Confine([]string{filepath.Join(root, "missing-yet"), root}, rule)
	name := filepath.Join(root, "a", "b", "file.txt")
	must(t, f.MkdirAll(filepath.Dir(name), 0o700))
	fh, err := f.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	must(t, err)
	_, err = fh.WriteString("x")
	must(t, err)
	must(t, fh.Close())
	if b, err := f.ReadFile(root + "/a/../a/b/file.txt"); err != nil || string(b) != "x" {
		t.Errorf("read through a .. that stays inside: %q, %v", b, err)
	}
	must(t, f.Rename(name, filepath.Join(root, "a", "moved.txt")))
	es, err := f.ReadDir(filepath.Join(root, "a"))
	must(t, err)
	if len(es) != 2 || es[0].Name() != "b" || es[1].Name() != "moved.txt" {
		t.Errorf("ReadDir = %v", es)
	}
	if _, err := f.Stat(name); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat of the renamed file: %v, want not exist", err)
	}
	if _, err := f.Lstat(filepath.Join(root, "a", "nope")); err == nil || !strings.Contains(err.Error(), filepath.Join(root, "a", "nope")) {
		t.Errorf("an error of the os package names the path as given: %v", err)
	}
	must(t, f.Chmod(filepath.Join(root, "a", "moved.txt"), 0o640))
	must(t, f.RemoveAll(filepath.Join(root, "a")))

	// A root that does not exist yet is made by what creates beneath it.
	must(t, f.MkdirAll(filepath.Join(root, "missing-yet", "x"), 0o700))

	for _, p := range []string{filepath.Join(other, "x"), root + "/../" + filepath.Base(other) + "/x", root + "x/y", "/etc/passwd"} {
		if _, err := f.OpenFile(p, os.O_RDONLY, 0); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "outside the allowed file roots") {
			t.Errorf("open %s: %v, want refused as outside", p, err)
		}
	}
	if err := f.Rename(filepath.Join(root, "missing-yet", "x"), filepath.Join(other, "x")); !errors.Is(err, ErrDenied) {
		t.Errorf("rename out of the roots: %v, want refused", err)
	}
	if Confine(nil, rule).Confined() != true || (FS{}).Confined() {
		t.Error("Confined: a confined FS without roots refuses everything; only the zero FS is the host's")
	}
	if _, err := Confine(nil, rule).Stat(root); !errors.Is(err, ErrDenied) {
		t.Errorf("no roots: %v, want refused", err)
	}
}

// TestFSRelative: a relative name is taken from the working directory.
func TestFSRelative(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	f := Confine([]string{root}, rule)
	must(t, f.MkdirAll("d", 0o700))
	if _, err := f.Stat("d"); err != nil {
		t.Errorf("stat d: %v", err)
	}
	if _, err := f.Stat("../x"); !errors.Is(err, ErrDenied) {
		t.Errorf("stat ../x: %v, want refused", err)
	}
}
