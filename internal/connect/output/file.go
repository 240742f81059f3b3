package output

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

func init() {
	component.Default.RegisterOutput(component.Spec{
		Name: "file",
		Summary: "In a stream, appends each message payload to `path` (at-least-once: a batch retried " +
			"after a failure or a restart may be written twice), optionally rotating it by size: the full " +
			"file becomes `<path>.1`, an existing `<path>.1` becomes `<path>.2` and so on, and the oldest " +
			"beyond `max_backups` is deleted. In a job it is exactly-once by two-phase commit and writes " +
			"part files instead of `path`: what a sink subtask writes between two checkpoints goes to a " +
			"pending file in `<dir>/.<base>.pending/`, made durable when a checkpoint is taken and renamed " +
			"to `<dir>/<stem>-<operator>-<subtask>-<checkpoint><ext>` (the checkpoint number padded " +
			"to 20 digits) when the checkpoint completes, for `path` `<dir>/<stem><ext>`; e.g. " +
			"`out/counts.jsonl` gives `out/counts-sink-0-00000000000000000003.jsonl`, so a sorted " +
			"listing is in commit order per subtask. A restored job commits the checkpoint's pending " +
			"files and discards the others. `max_bytes`, `max_backups` and `sync` do not apply in a job " +
			"(part files are not rotated and always fsynced at the checkpoint).",
		Schema: component.ObjectSchema(map[string]any{
			"path": component.Prop("string", "File to append to in a stream; in a job, the part files are named after it. Missing parent "+
				"directories are created.", nil),
			"append_newline": appendNewlineProp(),
			"max_bytes": func() map[string]any {
				p := component.Prop("integer", "Rotate before a message would make the file larger than this; "+
					"0 disables rotation. A message larger than this gets a file of its own. Streams only.", 0)
				p["minimum"] = 0
				return p
			}(),
			"max_backups": func() map[string]any {
				p := component.Prop("integer", "Rotated files kept (`<path>.1` is the newest). Streams only.", 5)
				p["minimum"] = 1
				return p
			}(),
			"sync": component.Prop("boolean", "fsync the file after every batch (and before rotating it). Streams only: in a job, part "+
				"files are fsynced at each checkpoint.", false),
			"mode": modeProp("Permissions of the files it creates (the file at `path`, rotated ones keep theirs; in a job the "+
				"pending and part files), in octal, less the process umask. Private by default: set `0644` for others to read "+
				"the output.", defaultFileMode),
			"dir_mode": modeProp("Permissions of the directories it creates (missing parents of `path`; in a job also the "+
				"pending directory), in octal, less the process umask. Existing directories are left as they are.", defaultDirMode),
		}, "path"),
		Example: `type: file
path: /tmp/flowplane-example/out.jsonl
append_newline: true
max_bytes: 10485760
max_backups: 3
sync: false
mode: "0600"
`,
	}, NewFile)
}

var _ component.Transactional = (*File)(nil)

// Default modes of what the file output creates: the output may hold
// anything the pipeline read, so it is the node owner's unless the
// configuration opens it.
const (
	defaultFileMode = "0600"
	defaultDirMode  = "0700"
)

// modePattern is an octal permission string: "0644", "644", "0o750".
const modePattern = `^(0o?)?[0-7]{3}$`

func modeProp(desc, def string) map[string]any {
	p := component.Prop("string", desc, def)
	p["pattern"] = modePattern
	return p
}

// parseMode reads an octal permission string.
func parseMode(field, s string) (fs.FileMode, error) {
	m, err := strconv.ParseUint(strings.TrimPrefix(s, "0o"), 8, 32)
	if err != nil || m > 0o777 || s == "" {
		return 0, fmt.Errorf("%s: %q is not an octal permission such as 0600", field, s)
	}
	return fs.FileMode(m), nil
}

// FileConfig is the configuration of the file output.
type FileConfig struct {
	Path          string `json:"path"`
	AppendNewline bool   `json:"append_newline"`
	MaxBytes      int64  `json:"max_bytes"`
	MaxBackups    int    `json:"max_backups"`
	Sync          bool   `json:"sync"`
	Mode          string `json:"mode"`
	DirMode       string `json:"dir_mode"`
}

// File appends payloads to a file. After a failed Write the file is closed
// and opened again by the next Write, which the runtime retries. In a job,
// Begin makes it transactional (see file_txn.go).
type File struct {
	conf          FileConfig
	mode, dirMode fs.FileMode // parsed Mode and DirMode
	fs            sandbox.FS  // every file and directory goes through it

	// Owned by the goroutine that calls Connect, Write, Close and the
	// Transactional methods.
	f       *os.File
	w       *bufio.Writer
	size    int64
	created bool      // Connect created the file at path
	txn     *txnState // set by Begin
}

// NewFile builds a file output from its configuration. It does not touch
// the file system: Connect does.
func NewFile(conf map[string]any, res component.Resources) (component.Output, error) {
	c := FileConfig{AppendNewline: true, MaxBackups: 5, Mode: defaultFileMode, DirMode: defaultDirMode}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("path: required"))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, errors.New("max_bytes: must not be negative"))
	}
	if c.MaxBackups < 1 {
		errs = append(errs, errors.New("max_backups: must be at least 1"))
	}
	mode, err := parseMode("mode", c.Mode)
	if err != nil {
		errs = append(errs, err)
	}
	dirMode, err := parseMode("dir_mode", c.DirMode)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &File{conf: c, mode: mode, dirMode: dirMode, fs: res.FS}, nil
}

// Connect creates the parent directories and opens the file for appending.
func (o *File) Connect(context.Context) error {
	if err := o.fs.MkdirAll(filepath.Dir(o.conf.Path), o.dirMode); err != nil {
		return fmt.Errorf("file output: %w", err)
	}
	_, err := o.fs.Lstat(o.conf.Path)
	o.created = errors.Is(err, fs.ErrNotExist)
	return o.open()
}

func (o *File) open() error {
	f, err := o.fs.OpenFile(o.conf.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, o.mode)
	if err != nil {
		return fmt.Errorf("file output: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("file output: %w", err)
	}
	o.f, o.size = f, st.Size()
	if o.w == nil {
		o.w = bufio.NewWriterSize(f, 64<<10)
	} else {
		o.w.Reset(f)
	}
	return nil
}

// Write appends every payload, rotating when max_bytes would be exceeded,
// then flushes (and fsyncs with sync).
func (o *File) Write(ctx context.Context, b message.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.txn != nil {
		return o.writeTxn(b)
	}
	if o.f == nil {
		if err := o.open(); err != nil {
			return err
		}
	}
	if err := o.write(b); err != nil {
		o.abandon()
		return fmt.Errorf("file output: %w", err)
	}
	return nil
}

func (o *File) write(b message.Batch) error {
	if err := o.writeMessages(b); err != nil {
		return err
	}
	return o.flush()
}

// writeMessages writes the payloads to the buffered writer, rotating in a
// stream when max_bytes would be exceeded.
func (o *File) writeMessages(b message.Batch) error {
	rotate := o.txn == nil && o.conf.MaxBytes > 0
	nl := int64(0)
	if o.conf.AppendNewline {
		nl = 1
	}
	for i := range b.Messages {
		p, err := b.Messages[i].Payload()
		if err != nil {
			return err
		}
		n := int64(len(p)) + nl
		if rotate && o.size > 0 && o.size+n > o.conf.MaxBytes {
			if err := o.rotate(); err != nil {
				return err
			}
		}
		if _, err := o.w.Write(p); err != nil {
			return err
		}
		if nl == 1 {
			if err := o.w.WriteByte('\n'); err != nil {
				return err
			}
		}
		o.size += n
	}
	return nil
}

func (o *File) flush() error {
	if err := o.w.Flush(); err != nil {
		return err
	}
	if o.conf.Sync {
		return o.f.Sync()
	}
	return nil
}

// rotate closes the full file, shifts the numbered backups up by one
// (deleting the oldest) and opens a new, empty file.
func (o *File) rotate() error {
	if err := o.flush(); err != nil {
		return err
	}
	if err := o.f.Close(); err != nil {
		return err
	}
	o.f = nil
	base := o.conf.Path
	if err := o.fs.Remove(backupName(base, o.conf.MaxBackups)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for i := o.conf.MaxBackups - 1; i >= 1; i-- {
		if err := o.fs.Rename(backupName(base, i), backupName(base, i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := o.fs.Rename(base, backupName(base, 1)); err != nil {
		return err
	}
	return o.open()
}

func backupName(path string, n int) string { return path + "." + strconv.Itoa(n) }

// abandon drops the buffered bytes and closes the file after a failure so
// that the next Write starts from a freshly opened file.
func (o *File) abandon() {
	if o.f != nil {
		_ = o.f.Close()
		o.f = nil
	}
	if o.w != nil {
		o.w.Reset(nil)
	}
}

// Close flushes, fsyncs with sync, and closes the file. In a job it closes
// the in-progress file, whose data no checkpoint covers: the next Begin of
// this operator and subtask discards it.
func (o *File) Close(context.Context) error {
	if o.txn != nil {
		return o.closeTxn()
	}
	if o.f == nil {
		return nil
	}
	err := o.flush()
	err = errors.Join(err, o.f.Close())
	o.f = nil
	if err != nil {
		return fmt.Errorf("file output: %w", err)
	}
	return nil
}
