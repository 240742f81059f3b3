package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flowplane/flowplane/internal/job"
)

// Key layout. Every key starts with a 4-byte big-endian table id:
//
//	table 0 (the registry):  00 00 00 00 | 't' | operatorID 0x00 name  -> 4-byte table id
//	table t (t >= 1):        t (4 bytes) | key group (4 bytes)  | key   -> value
//
// Both prefixes are fixed width and big-endian, so a table's entries sort by
// key group then key, and the entries of a key-group range are one
// contiguous key range: Scan and Restore are range scans. Table ids are
// small numbers handed out in order of first use and persisted in the
// registry (written in the same batch as the table's first entries), so
// they are stable across reopen and restore; Restore maps ids by name,
// since two stores may have numbered the same table differently.
const (
	idLen     = 4
	kgLen     = 4
	prefixLen = idLen + kgLen
	// registryTag follows table id 0 in registry keys.
	registryTag = 't'
	// restoreBatchBytes bounds the batch Restore commits at once.
	restoreBatchBytes = 4 << 20
)

// Pebble options, chosen for the kernel's access pattern: operators keep
// state in Go maps and write the entries changed since the last barrier
// here in one batch, then checkpoint. Reads happen at restore and in scans.
const (
	// memTableSize is large enough that the changes of a typical barrier
	// interval fit in one memtable (so Flush is a memory append and the
	// only sstable written per checkpoint is the one Checkpoint forces),
	// small enough that tens of tasks in one process stay within a few
	// hundred MiB. Pebble grows memtables from 256 KiB up to it, so an
	// idle task does not pay for it.
	memTableSize = 32 << 20
	// cacheSize is the block cache: small, because the hot state is the
	// operators' maps, not Pebble's blocks.
	cacheSize = 8 << 20
)

// Store is one task's keyed state. It is owned by the task's goroutine and
// is not safe for concurrent use. Writes go to a pending batch that Flush
// commits; reads see pending writes.
//
// The WAL is disabled: durability comes from checkpoints, and a WAL would
// write every byte twice and be copied into each checkpoint. Checkpoint
// therefore flushes the memtable to an sstable before linking the files,
// and Close flushes it too, so that data committed by Flush survives a
// reopen; only a crash loses it (recovery restores the last checkpoint).
type Store struct {
	dir     string
	db      *pebble.DB
	pending *pebble.Batch
	tables  map[string]*Table // by registry name
	nextID  uint32
}

// Open opens (creating) the store in dir. An existing store is opened as is.
func Open(dir string) (*Store, error) {
	cache := pebble.NewCache(cacheSize)
	defer cache.Unref() // the DB holds its own reference
	opts := &pebble.Options{
		Cache:              cache,
		MemTableSize:       memTableSize,
		DisableWAL:         true,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             quietLogger{},
		FS:                 privateFS{vfs.Default},
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("state: open store %s: %w", dir, err)
	}
	s := &Store{dir: dir, db: db, tables: map[string]*Table{}, nextID: 1}
	reg, err := readRegistry(db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("state: open store %s: %w", dir, err)
	}
	for name, id := range reg {
		s.tables[name] = &Table{s: s, id: id}
		s.nextID = max(s.nextID, id+1)
	}
	s.pending = db.NewIndexedBatch()
	return s, nil
}

// registryName is the registry's name of an operator's table; operator ids
// cannot contain a NUL, so names never collide.
func registryName(operatorID, name string) string { return operatorID + "\x00" + name }

func registryKey(name string) []byte {
	k := make([]byte, idLen+1, idLen+1+len(name))
	k[idLen] = registryTag
	return append(k, name...)
}

// readRegistry reads the table name -> id registry of db.
func readRegistry(r pebble.Reader) (map[string]uint32, error) {
	lower := registryKey("")
	upper := append(lower[:idLen:idLen], registryTag+1)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	reg := map[string]uint32{}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return nil, err
		}
		if len(v) != idLen {
			it.Close()
			return nil, fmt.Errorf("registry entry %q: table id of %d bytes", it.Key()[idLen+1:], len(v))
		}
		reg[string(it.Key()[idLen+1:])] = binary.BigEndian.Uint32(v)
	}
	return reg, it.Close()
}

// Table returns the table name of the operator: keys of different tables
// never collide.
func (s *Store) Table(operatorID, name string) *Table {
	return s.table(registryName(operatorID, name))
}

func (s *Store) table(name string) *Table {
	if t, ok := s.tables[name]; ok {
		return t
	}
	t := &Table{s: s, id: s.nextID}
	s.nextID++
	var v [idLen]byte
	binary.BigEndian.PutUint32(v[:], t.id)
	// A failed registration is reported by the table's every call.
	t.err = s.pending.Set(registryKey(name), v[:], nil)
	s.tables[name] = t
	return t
}

// Flush commits the pending batch.
func (s *Store) Flush() error {
	if s.pending.Empty() {
		return nil
	}
	if err := s.pending.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("state: flush: %w", err)
	}
	s.pending.Reset()
	return nil
}

// Checkpoint flushes, then writes a consistent copy of the store to dir
// (which must not exist), hard-linking where it can.
func (s *Store) Checkpoint(dir string) error {
	if err := s.Flush(); err != nil {
		return err
	}
	// Without a WAL, committed data lives only in the memtable until it is
	// flushed; the checkpoint copies sstables, so flush it first.
	if err := s.db.Flush(); err != nil {
		return fmt.Errorf("state: checkpoint: flush memtable: %w", err)
	}
	if err := s.db.Checkpoint(dir); err != nil {
		return fmt.Errorf("state: checkpoint to %s: %w", dir, err)
	}
	return nil
}

// DiskBytes is the store's size on disk.
func (s *Store) DiskBytes() int64 {
	return int64(s.db.Metrics().DiskSpaceUsage())
}

// Close flushes nothing: unflushed writes are lost, as after a crash.
// Writes committed by Flush are kept.
func (s *Store) Close() error {
	s.pending.Close()
	err := s.db.Flush()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("state: close store %s: %w", s.dir, err)
	}
	return nil
}

// Table is one operator's named table in a Store.
type Table struct {
	s   *Store
	id  uint32
	err error // registration failure
	key []byte
}

// entryKey builds the entry key into t's scratch buffer; it is only valid
// until the next call.
func (t *Table) entryKey(kg int, key []byte) []byte {
	k := t.key[:0]
	k = binary.BigEndian.AppendUint32(k, t.id)
	k = binary.BigEndian.AppendUint32(k, uint32(kg))
	k = append(k, key...)
	t.key = k
	return k
}

// bound is the first key of key group kg (kg may be one past the last).
func (t *Table) bound(kg int) []byte {
	k := make([]byte, 0, prefixLen)
	k = binary.BigEndian.AppendUint32(k, t.id)
	return binary.BigEndian.AppendUint32(k, uint32(kg))
}

// Put sets key's value in key group kg.
func (t *Table) Put(kg int, key, value []byte) error {
	if t.err != nil {
		return t.err
	}
	if err := t.s.pending.Set(t.entryKey(kg, key), value, nil); err != nil {
		return fmt.Errorf("state: put: %w", err)
	}
	return nil
}

// Delete removes key from key group kg.
func (t *Table) Delete(kg int, key []byte) error {
	if t.err != nil {
		return t.err
	}
	if err := t.s.pending.Delete(t.entryKey(kg, key), nil); err != nil {
		return fmt.Errorf("state: delete: %w", err)
	}
	return nil
}

// Get returns key's value in key group kg; ok is false when absent.
// The value is a copy the caller may keep.
func (t *Table) Get(kg int, key []byte) (value []byte, ok bool, err error) {
	if t.err != nil {
		return nil, false, t.err
	}
	v, closer, err := t.s.pending.Get(t.entryKey(kg, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("state: get: %w", err)
	}
	value = bytes.Clone(v)
	if value == nil {
		value = []byte{}
	}
	return value, true, closer.Close()
}

// Scan calls fn for every entry whose key group is in r, in key-group then
// key order. The slices are only valid during the call.
func (t *Table) Scan(r job.Range, fn func(kg int, key, value []byte) error) error {
	if t.err != nil {
		return t.err
	}
	if err := scan(t.s.pending, t.id, r, fn); err != nil {
		return fmt.Errorf("state: scan: %w", err)
	}
	return nil
}

func scan(rd pebble.Reader, id uint32, r job.Range, fn func(kg int, key, value []byte) error) error {
	if r.Len() <= 0 {
		return nil
	}
	t := Table{id: id}
	it, err := rd.NewIter(&pebble.IterOptions{LowerBound: t.bound(r.Start), UpperBound: t.bound(r.End + 1)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		k := it.Key()
		if err := fn(int(binary.BigEndian.Uint32(k[idLen:prefixLen])), k[prefixLen:], v); err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}

// Restore copies into s every entry of the checkpointed stores in dirs
// whose key group is in r (rescaling reads several old stores, each
// partly). The dirs are opened read-only and left as they are.
//
// It commits what it copies in batches of at most about 4 MiB, together
// with anything pending in s.
func Restore(s *Store, dirs []string, r job.Range) error {
	for _, dir := range dirs {
		if err := restoreOne(s, dir, r); err != nil {
			return fmt.Errorf("state: restore from %s: %w", dir, err)
		}
	}
	return s.Flush()
}

func restoreOne(s *Store, dir string, r job.Range) error {
	desc, err := pebble.Peek(dir, vfs.Default)
	if err != nil {
		return err
	}
	if !desc.Exists {
		return errors.New("not a store checkpoint")
	}
	src, err := pebble.Open(dir, &pebble.Options{
		ReadOnly:           true,
		FS:                 noLockFS{vfs.Default},
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             quietLogger{},
	})
	if err != nil {
		return err
	}
	defer src.Close()
	reg, err := readRegistry(src)
	if err != nil {
		return err
	}
	for name, id := range reg {
		t := s.table(name)
		if t.err != nil {
			return t.err
		}
		err := scan(src, id, r, func(kg int, key, value []byte) error {
			if err := t.Put(kg, key, value); err != nil {
				return err
			}
			if s.pending.Len() >= restoreBatchBytes {
				return s.Flush()
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("table %q: %w", strings.ReplaceAll(name, "\x00", "/"), err)
		}
	}
	return nil
}

// privateFS is the file system of a store: its directories are created
// 0700 and its files 0600, for they hold the job's state, which is the
// node owner's alone. Pebble's own default is 0755 and 0666 less the
// umask. A checkpoint (hard links or copies, through the same FS) keeps
// the modes.
type privateFS struct{ vfs.FS }

func (p privateFS) MkdirAll(dir string, _ os.FileMode) error { return p.FS.MkdirAll(dir, 0o700) }

func (p privateFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.Create(name, c)
	return narrow(f, err, name)
}

func (p privateFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := p.FS.OpenReadWrite(name, c, opts...)
	return narrow(f, err, name)
}

func (p privateFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.ReuseForWrite(oldname, newname, c)
	return narrow(f, err, newname)
}

func (p privateFS) Lock(name string) (io.Closer, error) {
	c, err := p.FS.Lock(name)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(name, 0o600); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// narrow makes the file just opened at name 0600; the store's directory is
// 0700, so the file was never readable by others in between.
func narrow(f vfs.File, err error, name string) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(name, 0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// noLockFS opens checkpoints read-only without creating a LOCK file in
// them, so that they are left as they are and several restores may read
// one checkpoint at once.
type noLockFS struct{ vfs.FS }

func (noLockFS) Lock(string) (io.Closer, error) { return nopCloser{}, nil }

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// quietLogger drops Pebble's informational messages; errors reach callers
// as return values.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Errorf(string, ...interface{}) {}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
