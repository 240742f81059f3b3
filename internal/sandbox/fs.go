package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// FS opens, creates and removes the files of components. Confined (see
// [Confine]), each operation picks the allowed root the path is written
// beneath and performs it through an [os.Root] of that root, so that ".."
// and symbolic links are resolved by the kernel inside the root at the
// moment of use: a link swapped in after the policy checked the path
// cannot lead out. Its zero value is the host's file system, unrestricted.
// An FS is a value; it is safe for concurrent use.
type FS struct {
	roots []string // absolute and clean; nil: unrestricted
	rule  string   // cited by refusals
}

// Confine returns an FS restricted to roots (absolute paths; others are
// ignored) whose refusals cite rule. With no usable root every path is
// refused.
func Confine(roots []string, rule string) FS {
	f := FS{roots: []string{}, rule: rule}
	for _, r := range roots {
		if filepath.IsAbs(r) {
			f.roots = append(f.roots, filepath.Clean(r))
		}
	}
	return f
}

// Confined reports whether f restricts paths to roots.
func (f FS) Confined() bool { return f.roots != nil }

// Roots returns the roots f is confined to (nil when it is not).
func (f FS) Roots() []string { return slices.Clone(f.roots) }

// Beneath returns name (absolute) relative to root (absolute, clean) when
// name is written as root followed by more path and its lexical form
// stays beneath root too; "" is root itself. Whether the rest stays in
// root once ".." and links are resolved is os.Root's call, not this one's.
func Beneath(root, name string) (rel string, ok bool) {
	rel, ok = cutRoot(root, name)
	if !ok {
		return "", false
	}
	if _, ok := cutRoot(root, filepath.Clean(name)); !ok {
		return "", false
	}
	return rel, true
}

func cutRoot(root, name string) (string, bool) {
	if name == root {
		return "", true
	}
	prefix := root
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	rest, ok := strings.CutPrefix(name, prefix)
	return strings.TrimLeft(rest, string(filepath.Separator)), ok
}

// open finds the root name is beneath and opens it; rel is name inside
// it. create makes a root that does not exist yet (the node owner named
// it, so making it gives nothing away). Unconfined, r is nil and rel is
// name.
func (f FS) open(op, name string, create bool) (r *os.Root, rel string, err error) {
	if !f.Confined() {
		return nil, name, nil
	}
	abs := name
	if !filepath.IsAbs(abs) {
		if abs, err = filepath.Abs(name); err != nil {
			return nil, "", f.deny(op, name, "is outside the allowed file roots (the working directory is unknown)")
		}
	}
	for _, root := range f.roots {
		rel, ok := Beneath(root, abs)
		if !ok {
			continue
		}
		if rel == "" {
			rel = "."
		}
		r, err := os.OpenRoot(root)
		if errors.Is(err, fs.ErrNotExist) && create {
			if err = os.MkdirAll(root, 0o700); err == nil {
				r, err = os.OpenRoot(root)
			}
		}
		if err != nil {
			return nil, "", fmt.Errorf("%s %s: open its file root: %w", op, name, err)
		}
		return r, rel, nil
	}
	return nil, "", f.deny(op, name, "is outside the allowed file roots")
}

func (f FS) deny(op, name, reason string) error {
	return &Error{Op: op, Path: name, Reason: reason, Rule: f.rule}
}

// done closes r and turns an escape os.Root refused into a refusal; other
// errors keep their kind, with the path the component named.
func (f FS) done(r *os.Root, op, name string, err error) error {
	r.Close()
	if err == nil {
		return nil
	}
	if escapes(err) {
		return f.deny(op, name, "leaves its file root through .. or a symbolic link")
	}
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		pe.Path = name
	}
	return err
}

// escapeErr is the error os.Root wraps when a path leaves it, which the
// os package does not export: it is learned once by asking a root for
// its parent.
var escapeErr = sync.OnceValue(func() error {
	r, err := os.OpenRoot(os.TempDir())
	if err != nil {
		return nil
	}
	defer r.Close()
	_, err = r.Lstat("..")
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return nil
})

func escapes(err error) bool {
	e := escapeErr()
	return e != nil && errors.Is(err, e)
}

// OpenFile is os.OpenFile through f.
func (f FS) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	r, rel, err := f.open("open", name, flag&os.O_CREATE != 0)
	if err != nil || r == nil {
		if err != nil {
			return nil, err
		}
		return os.OpenFile(name, flag, perm)
	}
	fh, err := r.OpenFile(rel, flag, perm)
	return fh, f.done(r, "open", name, err)
}

// Open is os.Open through f.
func (f FS) Open(name string) (*os.File, error) { return f.OpenFile(name, os.O_RDONLY, 0) }

// ReadFile is os.ReadFile through f.
func (f FS) ReadFile(name string) ([]byte, error) {
	r, rel, err := f.open("read", name, false)
	if err != nil || r == nil {
		if err != nil {
			return nil, err
		}
		return os.ReadFile(name)
	}
	b, err := r.ReadFile(rel)
	return b, f.done(r, "read", name, err)
}

// ReadDir is os.ReadDir through f: the entries sorted by name.
func (f FS) ReadDir(name string) ([]fs.DirEntry, error) {
	d, err := f.Open(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	es, err := d.ReadDir(-1)
	slices.SortFunc(es, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return es, err
}

// Stat is os.Stat through f.
func (f FS) Stat(name string) (fs.FileInfo, error) {
	return f.stat("stat", name, (*os.Root).Stat, os.Stat)
}

// Lstat is os.Lstat through f.
func (f FS) Lstat(name string) (fs.FileInfo, error) {
	return f.stat("lstat", name, (*os.Root).Lstat, os.Lstat)
}

func (f FS) stat(op, name string, in func(*os.Root, string) (fs.FileInfo, error), host func(string) (fs.FileInfo, error)) (fs.FileInfo, error) {
	r, rel, err := f.open(op, name, false)
	if err != nil || r == nil {
		if err != nil {
			return nil, err
		}
		return host(name)
	}
	fi, err := in(r, rel)
	return fi, f.done(r, op, name, err)
}

// MkdirAll is os.MkdirAll through f.
func (f FS) MkdirAll(name string, perm fs.FileMode) error {
	return f.do("mkdir", name, true, func(r *os.Root, rel string) error { return r.MkdirAll(rel, perm) },
		func() error { return os.MkdirAll(name, perm) })
}

// Remove is os.Remove through f.
func (f FS) Remove(name string) error {
	return f.do("remove", name, false, func(r *os.Root, rel string) error { return r.Remove(rel) },
		func() error { return os.Remove(name) })
}

// RemoveAll is os.RemoveAll through f.
func (f FS) RemoveAll(name string) error {
	return f.do("remove", name, false, func(r *os.Root, rel string) error { return r.RemoveAll(rel) },
		func() error { return os.RemoveAll(name) })
}

// Chmod is os.Chmod through f.
func (f FS) Chmod(name string, mode fs.FileMode) error {
	return f.do("chmod", name, false, func(r *os.Root, rel string) error { return r.Chmod(rel, mode) },
		func() error { return os.Chmod(name, mode) })
}

func (f FS) do(op, name string, create bool, in func(*os.Root, string) error, host func() error) error {
	r, rel, err := f.open(op, name, create)
	if err != nil {
		return err
	}
	if r == nil {
		return host()
	}
	return f.done(r, op, name, in(r, rel))
}

// Rename is os.Rename through f; both names must be beneath the same root.
func (f FS) Rename(oldname, newname string) error {
	if !f.Confined() {
		return os.Rename(oldname, newname)
	}
	r, oldRel, err := f.open("rename", oldname, false)
	if err != nil {
		return err
	}
	r2, newRel, err := f.open("rename", newname, false)
	if err != nil {
		r.Close()
		return err
	}
	same := r2.Name() == r.Name()
	r2.Close()
	if !same {
		r.Close()
		return fmt.Errorf("rename %s to %s: the two are beneath different file roots", oldname, newname)
	}
	return f.done(r, "rename", oldname, r.Rename(oldRel, newRel))
}

// Pin opens the directory dir through f (so it must be, now, a directory
// within a root) and returns a path that names that very directory, for
// code that opens files by path itself (SQLite, gocloud's fileblob): on
// Linux /proc/self/fd/<n> of the open directory, so that the directory,
// or one above it, swapped for a link after Pin is not followed. What is
// inside the pinned directory is resolved by that code, not by os.Root: a
// link placed in the directory itself is still followed. The path holds
// until release is called. Unconfined, or where /proc does not name open
// directories, the path is dir itself (checked, not pinned).
func (f FS) Pin(dir string) (path string, release func() error, err error) {
	if !f.Confined() {
		return dir, func() error { return nil }, nil
	}
	d, err := f.Open(dir)
	if err != nil {
		return "", nil, err
	}
	if fi, err := d.Stat(); err != nil || !fi.IsDir() {
		d.Close()
		return "", nil, fmt.Errorf("pin %s: not a directory", dir)
	}
	if runtime.GOOS == "linux" {
		p := "/proc/self/fd/" + strconv.Itoa(int(d.Fd()))
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p, d.Close, nil
		}
	}
	return dir, d.Close, nil
}

// WalkDir is filepath.WalkDir through f: the tree is walked inside the
// root (fs.WalkDir over os.Root.FS), paths handed to fn as written
// beneath dir.
func (f FS) WalkDir(dir string, fn fs.WalkDirFunc) error {
	r, rel, err := f.open("walk", dir, false)
	if err != nil {
		return err
	}
	if r == nil {
		return filepath.WalkDir(dir, fn)
	}
	defer r.Close()
	err = fs.WalkDir(r.FS(), filepath.ToSlash(rel), func(p string, d fs.DirEntry, err error) error {
		sub := strings.TrimPrefix(strings.TrimPrefix(p, filepath.ToSlash(rel)), "/")
		if err != nil && escapes(err) {
			err = f.deny("walk", filepath.Join(dir, sub), "leaves its file root through .. or a symbolic link")
		}
		return fn(filepath.Join(dir, filepath.FromSlash(sub)), d, err)
	})
	if err != nil && escapes(err) {
		return f.deny("walk", dir, "leaves its file root through .. or a symbolic link")
	}
	return err
}

// PinParent is Pin of name's directory joined with name's last element,
// for code that opens name itself by path: name, when it exists, must
// resolve within its root now; its directory, and every one above it,
// cannot be swapped afterwards. name itself is resolved by that code:
// a link put in its place after PinParent is followed.
func (f FS) PinParent(name string) (path string, release func() error, err error) {
	if !f.Confined() {
		return name, func() error { return nil }, nil
	}
	if _, err := f.Stat(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", nil, err
	}
	dir, release, err := f.Pin(filepath.Dir(name))
	if err != nil {
		return "", nil, err
	}
	return dir + string(filepath.Separator) + filepath.Base(name), release, nil
}
