package history

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// tempPrefix starts the name of every temporary file; Open removes what a
// crash left behind.
const tempPrefix = ".tmp-"

// errUncertain marks a write that failed after its rename: the new file is
// in place but may not be durable. The store stops writing after one.
var errUncertain = errors.New("write may not be durable")

// writeAtomic replaces dir/name with data: temp file in dir, fsync, rename
// over the target, fsync dir. An error wrapping errUncertain means the
// rename happened; any other error leaves the target as it was and no
// temporary file behind.
func writeAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, tempPrefix+name+"-*")
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", name, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		_ = f.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("%w: %s: %w", errUncertain, filepath.Join(dir, name), err)
	}
	return nil
}

// syncDir makes the directory's entries (creations, renames, removals)
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// removeTemps deletes the temporary files a crash left in dir.
func removeTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	removed := false
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), tempPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			removed = true
		}
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}

// errOversized is a file past its size limit: damage, not an I/O error.
var errOversized = errors.New("file too large")

// readKind classifies a read error: ErrCorrupt for an oversized file,
// ErrStorage for I/O.
func readKind(err error) error {
	if errors.Is(err, errOversized) {
		return ErrCorrupt
	}
	return ErrStorage
}

// readLimited reads a file of at most limit bytes; a larger file is an
// error rather than a large allocation.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: larger than %d bytes", errOversized, limit)
	}
	return data, nil
}
