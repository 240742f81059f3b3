package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/flowplane/flowplane/internal/sandbox"
)

// Reasons a path is refused, for errors.Is.
var (
	ErrOutsideRoots = errors.New("outside the allowed file roots")
	ErrEscapes      = errors.New("leaves its root through .. or a symbolic link")
)

// Within decides whether a component of Hub-delivered work may read or
// write the file name: it must be written beneath one of roots (absolute,
// clean), and resolving it inside that root through [os.Root] must not
// leave the root. A relative name is taken from the working directory.
// The part of name that exists is resolved (symbolic links followed, each
// within the root); a dangling link is refused, since writing through it
// would create its target wherever it points. nil means allowed; the
// error wraps ErrOutsideRoots or ErrEscapes and never quotes more than
// name.
func Within(roots []string, name string) error {
	if name == "" {
		return fmt.Errorf("an empty path is %w", ErrOutsideRoots)
	}
	abs := name
	if !filepath.IsAbs(abs) {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("%s is %w (the working directory is unknown)", name, ErrOutsideRoots)
		}
		abs = wd + string(filepath.Separator) + name
	}
	for _, r := range roots {
		// The root is chosen by the written path and its lexical form
		// both; whether the written path stays in it is os.Root's call.
		rel, ok := sandbox.Beneath(r, abs)
		if !ok {
			continue
		}
		return inRoot(r, rel, name)
	}
	return fmt.Errorf("%s is %w", name, ErrOutsideRoots)
}

// inRoot resolves rel inside root through os.Root: its longest existing
// prefix must resolve without leaving root.
func inRoot(root, rel, name string) error {
	r, err := os.OpenRoot(root)
	if errors.Is(err, fs.ErrNotExist) {
		// Nothing beneath a root that does not exist yet can be a link:
		// what is written is what gets created, unless it holds "..".
		for el := range strings.SplitSeq(rel, string(filepath.Separator)) {
			if el == ".." {
				return fmt.Errorf("%s %w", name, ErrEscapes)
			}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s is %w (the root %s cannot be opened)", name, ErrOutsideRoots, root)
	}
	defer r.Close()
	for cand := rel; ; {
		if cand == "" {
			cand = "."
		}
		fi, err := r.Lstat(cand)
		switch {
		case errors.Is(err, fs.ErrNotExist) && cand != ".":
			// What does not exist yet is made as written: a ".." there
			// would be resolved by whoever creates it, not by os.Root.
			var last string
			cand, last = parent(cand), base(cand)
			if last == ".." {
				return fmt.Errorf("%s %w", name, ErrEscapes)
			}
			continue
		case err != nil:
			return fmt.Errorf("%s %w", name, ErrEscapes)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			// Followed inside the root, or refused: escaping and
			// dangling links alike.
			if _, err := r.Stat(cand); err != nil {
				return fmt.Errorf("%s %w", name, ErrEscapes)
			}
		}
		return nil
	}
}

// base is the last element of a relative path (see parent).
func base(rel string) string {
	rel = strings.TrimRight(rel, string(filepath.Separator))
	return rel[strings.LastIndexByte(rel, filepath.Separator)+1:]
}

// parent cuts the last element of a slash-separated relative path without
// cleaning it: "a/../b" has the parent "a/..", whose meaning os.Root
// decides, never a lexical rule.
func parent(rel string) string {
	rel = strings.TrimRight(rel, string(filepath.Separator))
	i := strings.LastIndexByte(rel, filepath.Separator)
	if i < 0 {
		return ""
	}
	return rel[:i]
}

// FS is the file system components of Hub-delivered work open their files
// through: every open, creation and removal is made through an os.Root of
// the allowed root the path is beneath, so that what Within allowed when
// the work arrived cannot have become a way out (a directory swapped for
// a symbolic link) by the time a component uses it.
func (p *Policy) FS() sandbox.FS { return sandbox.Confine(p.roots, RuleFileRoots) }
