package output

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// In a job the file output is exactly-once by two-phase commit. Begin
// switches it to transactional mode, where nothing is appended to path:
//
//   - Write appends to an in-progress file
//     <dir>/.<base>.pending/<operator>-<subtask>-<seq %020d>.inprogress,
//     created at the first message after a Prepare;
//   - Prepare flushes and fsyncs it and renames it to
//     <operator>-<subtask>-<checkpoint %020d>.pending in the same directory
//     (durable, not visible), then fsyncs the directory;
//   - Commit renames the prepared file to the part file
//     <dir>/<stem>-<operator>-<subtask>-<checkpoint %020d><ext>
//     and fsyncs dir.
//
// A rename is atomic, so after a crash each transaction is either prepared
// or final, and Commit can tell which.

// pendingExt and inProgressExt end the names of prepared and in-progress
// files.
const (
	pendingExt    = ".pending"
	inProgressExt = ".inprogress"
)

// fileTxn is the handle of a prepared transaction, as Prepare returns it.
// An empty transaction (nothing written since the previous Prepare) names
// no files and commits as a no-op.
type fileTxn struct {
	Checkpoint int64  `json:"checkpoint"`
	Prepared   string `json:"prepared,omitempty"`
	Final      string `json:"final,omitempty"`
	// Operator and Subtask name the sink subtask that prepared it, so that
	// a restore at a lower parallelism finds the pending files of the
	// subtasks that are gone. Older transactions lack them; their
	// prepared file's name says the same.
	Operator string `json:"operator,omitempty"`
	Subtask  int    `json:"subtask,omitempty"`
}

// owner is the sink operator and subtask that prepared txn; ok is false
// for an empty transaction of an older version, which names neither.
func (txn fileTxn) owner() (op string, subtask int, ok bool) {
	if txn.Operator != "" {
		return txn.Operator, txn.Subtask, true
	}
	if txn.Prepared == "" {
		return "", 0, false
	}
	op, subtask, _, ok = parsePendingName(filepath.Base(txn.Prepared))
	return op, subtask, ok
}

// txnState is the transactional mode of a File; nil in a stream.
type txnState struct {
	operator   string
	subtask    int
	pendingDir string // <dir>/.<base>.pending
	seq        int64  // number of the next in-progress file

	// The open in-progress file, nil when nothing was written since the
	// last Prepare.
	f    *os.File
	path string
	// failed is set by a Write that failed part way: the in-progress file
	// may hold part of a batch, so the transaction cannot be prepared and
	// the job must restart from its last checkpoint.
	failed error
}

// Begin switches the output to transactional mode for the sink operator's
// subtask: it commits the restored transactions, then deletes the
// in-progress files and the prepared files of checkpoints up to the
// restored one (data written after the restored checkpoint, which the job
// replays) of this operator's subtask and of every subtask of it whose
// transactions it restored (after a restore at a lower parallelism,
// subtask 0 restores those of the subtasks that are gone). Prepared files of later checkpoints
// are kept: a process that died while writing such a checkpoint's manifest
// may still have it land, and a restore from it commits them; the next
// commit of a later checkpoint deletes them. The file Connect opened at
// path is closed, and removed when Connect created it and it is still
// empty.
func (o *File) Begin(ctx context.Context, operator string, subtask int, restored [][]byte) error {
	if err := checkOperatorID(operator); err != nil {
		return fmt.Errorf("file output: %w", err)
	}
	if subtask < 0 {
		return fmt.Errorf("file output: subtask %d is negative", subtask)
	}
	if err := o.leaveStreamFile(); err != nil {
		return err
	}
	abs, err := filepath.Abs(o.conf.Path)
	if err != nil {
		return fmt.Errorf("file output: %w", err)
	}
	o.conf.Path = abs
	dir, base := filepath.Split(abs)
	t := &txnState{operator: operator, subtask: subtask, pendingDir: filepath.Join(dir, "."+base+".pending")}
	if err := o.fs.MkdirAll(t.pendingDir, o.dirMode); err != nil {
		return fmt.Errorf("file output: %w", err)
	}
	o.txn = t
	upTo := int64(-1) // the restored checkpoint
	covered := map[int]bool{subtask: true}
	for _, raw := range restored {
		if err := o.Commit(ctx, raw); err != nil {
			return fmt.Errorf("file output: restoring: %w", err)
		}
		var txn fileTxn
		if json.Unmarshal(raw, &txn) == nil {
			upTo = max(upTo, txn.Checkpoint)
			if op, sub, ok := txn.owner(); ok && op == operator {
				covered[sub] = true
			}
		}
	}
	return o.discardOf(covered, func(name string, n int64) bool {
		return strings.HasSuffix(name, inProgressExt) || n <= upTo
	})
}

// discard deletes the in-progress and prepared files of this operator and
// subtask that drop says to, then syncs the directory.
func (o *File) discard(drop func(name string, n int64) bool) error {
	return o.discardOf(map[int]bool{o.txn.subtask: true}, drop)
}

// discardOf is discard for the files of this operator's subtasks in
// subtasks.
func (o *File) discardOf(subtasks map[int]bool, drop func(name string, n int64) bool) error {
	t := o.txn
	entries, err := o.fs.ReadDir(t.pendingDir)
	if err != nil {
		return fmt.Errorf("file output: %w", err)
	}
	removed := false
	for _, e := range entries {
		op, sub, n, ok := parsePendingName(e.Name())
		if !ok || op != t.operator || !subtasks[sub] || !drop(e.Name(), n) {
			continue
		}
		if e.Name() == filepath.Base(t.path) {
			continue // the transaction being written
		}
		if err := o.fs.Remove(filepath.Join(t.pendingDir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file output: discarding an uncommitted transaction: %w", err)
		}
		removed = true
	}
	if removed {
		if err := syncDir(o.fs, t.pendingDir); err != nil {
			return fmt.Errorf("file output: %w", err)
		}
	}
	return nil
}

// checkOperatorID rejects operator ids that cannot be part of a file name.
func checkOperatorID(op string) error {
	if op == "" || op == "." || op == ".." || strings.ContainsAny(op, `/\`+"\x00") {
		return fmt.Errorf("operator id %q cannot name a file", op)
	}
	return nil
}

// leaveStreamFile closes the file Connect opened for appending, removing it
// when Connect created it and nothing was written.
func (o *File) leaveStreamFile() error {
	if o.f == nil {
		return nil
	}
	err := o.f.Close()
	o.f = nil
	if err != nil {
		return fmt.Errorf("file output: %w", err)
	}
	if o.created && o.size == 0 {
		if err := o.fs.Remove(o.conf.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file output: %w", err)
		}
	}
	return nil
}

// writeTxn appends a batch to the in-progress file. A failure poisons the
// transaction: a retried batch would otherwise be written twice.
func (o *File) writeTxn(b message.Batch) error {
	t := o.txn
	if t.failed != nil {
		return fmt.Errorf("file output: an earlier write failed; the job must restart from its last checkpoint: %w", t.failed)
	}
	if b.Len() == 0 {
		return nil
	}
	if t.f == nil {
		t.path = filepath.Join(t.pendingDir, pendingName(t.operator, t.subtask, t.seq, inProgressExt))
		f, err := o.fs.OpenFile(t.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, o.mode)
		if err != nil {
			return fmt.Errorf("file output: %w", err)
		}
		t.seq++
		t.f = f
		if o.w == nil {
			o.w = bufio.NewWriterSize(f, 64<<10)
		} else {
			o.w.Reset(f)
		}
	}
	if err := o.writeMessages(b); err != nil {
		t.failed = err
		return fmt.Errorf("file output: %w", err)
	}
	return nil
}

// Prepare seals what Write accepted since the last Prepare: it flushes and
// fsyncs the in-progress file, renames it to its prepared name, fsyncs the
// pending directory and returns the transaction. With nothing written it
// creates no file and returns a transaction that names none.
func (o *File) Prepare(ctx context.Context, checkpoint int64) ([]byte, error) {
	t := o.txn
	if t == nil {
		return nil, errors.New("file output: Prepare before Begin")
	}
	if t.failed != nil {
		return nil, fmt.Errorf("file output: an earlier write failed: %w", t.failed)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if checkpoint < 0 {
		return nil, fmt.Errorf("file output: checkpoint %d is negative", checkpoint)
	}
	txn := fileTxn{Checkpoint: checkpoint, Operator: t.operator, Subtask: t.subtask}
	if t.f != nil {
		err := o.w.Flush()
		if err == nil {
			err = t.f.Sync()
		}
		err = errors.Join(err, t.f.Close())
		t.f = nil
		o.w.Reset(nil)
		if err != nil {
			t.failed = err
			return nil, fmt.Errorf("file output: %w", err)
		}
		txn.Prepared = filepath.Join(t.pendingDir, pendingName(t.operator, t.subtask, checkpoint, pendingExt))
		txn.Final = o.partName(checkpoint)
		if err := o.fs.Rename(t.path, txn.Prepared); err != nil {
			t.failed = err
			return nil, fmt.Errorf("file output: %w", err)
		}
		if err := syncDir(o.fs, t.pendingDir); err != nil {
			t.failed = err
			return nil, fmt.Errorf("file output: %w", err)
		}
	}
	return json.Marshal(txn)
}

// Commit renames a prepared file to its part file and fsyncs the
// directory. A transaction whose prepared file is gone but whose part file
// exists was committed already: Commit does nothing. When both are gone
// the data is lost, which is an error.
func (o *File) Commit(_ context.Context, raw []byte) error {
	var txn fileTxn
	if err := json.Unmarshal(raw, &txn); err != nil {
		return fmt.Errorf("file output: transaction %s: %w", raw, err)
	}
	if txn.Prepared == "" && txn.Final == "" {
		return o.dropSuperseded(txn.Checkpoint) // an empty transaction
	}
	if txn.Prepared == "" || txn.Final == "" {
		return fmt.Errorf("file output: transaction %s names only one of prepared and final", raw)
	}
	err := o.fs.Rename(txn.Prepared, txn.Final)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := o.fs.Stat(txn.Final); serr == nil {
			return nil
		}
		return fmt.Errorf("file output: committing checkpoint %d: neither the prepared file %s nor the part file %s exists",
			txn.Checkpoint, txn.Prepared, txn.Final)
	}
	if err != nil {
		return fmt.Errorf("file output: committing checkpoint %d: %w", txn.Checkpoint, err)
	}
	if err := syncDir(o.fs, filepath.Dir(txn.Final)); err != nil {
		return fmt.Errorf("file output: committing checkpoint %d: %w", txn.Checkpoint, err)
	}
	return o.dropSuperseded(txn.Checkpoint)
}

// dropSuperseded deletes prepared files of checkpoints before the one just
// committed: a job only ever restores its newest checkpoint, so they can
// no longer be committed (they were left by a process that died while
// writing their checkpoint's manifest). The job commits its transactions
// in checkpoint order, so none of its own is among them.
func (o *File) dropSuperseded(checkpoint int64) error {
	if o.txn == nil {
		return nil
	}
	return o.discard(func(name string, n int64) bool {
		return strings.HasSuffix(name, pendingExt) && n < checkpoint
	})
}

// closeTxn closes an in-progress file, leaving it for the next Begin of
// this operator and subtask to discard.
func (o *File) closeTxn() error {
	t := o.txn
	if t.f == nil {
		return nil
	}
	err := errors.Join(o.w.Flush(), t.f.Close())
	t.f = nil
	if err != nil {
		return fmt.Errorf("file output: %w", err)
	}
	return nil
}

// partName is the final name of a checkpoint's data:
// <dir>/<stem>-<operator>-<subtask>-<checkpoint %020d><ext> for the
// configured path <dir>/<stem><ext>. Zero-padding makes a sorted listing
// the commit order of each subtask.
func (o *File) partName(checkpoint int64) string {
	dir, base := filepath.Split(o.conf.Path)
	ext := filepath.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	return filepath.Join(dir, stem+"-"+pendingName(o.txn.operator, o.txn.subtask, checkpoint, ext))
}

// pendingName is <operator>-<subtask>-<n %020d><ext>.
func pendingName(operator string, subtask int, n int64, ext string) string {
	b := make([]byte, 0, len(operator)+32+len(ext))
	b = append(b, operator...)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(subtask), 10)
	b = append(b, '-')
	num := strconv.AppendInt(nil, n, 10)
	for range 20 - len(num) {
		b = append(b, '0')
	}
	b = append(b, num...)
	return string(append(b, ext...))
}

// parsePendingName reads a name pendingName made with the extension
// pendingExt or inProgressExt. It parses from the right, since operator ids
// may contain '-'.
func parsePendingName(name string) (operator string, subtask int, n int64, ok bool) {
	rest, found := strings.CutSuffix(name, pendingExt)
	if !found {
		if rest, found = strings.CutSuffix(name, inProgressExt); !found {
			return "", 0, 0, false
		}
	}
	i := strings.LastIndexByte(rest, '-')
	if i < 0 || len(rest)-i-1 != 20 {
		return "", 0, 0, false
	}
	n, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil {
		return "", 0, 0, false
	}
	rest = rest[:i]
	j := strings.LastIndexByte(rest, '-')
	if j <= 0 {
		return "", 0, 0, false
	}
	sub, err := strconv.Atoi(rest[j+1:])
	if err != nil || sub < 0 {
		return "", 0, 0, false
	}
	return rest[:j], sub, n, true
}

// syncDir fsyncs a directory so that renames and removals in it are
// durable.
func syncDir(fsys sandbox.FS, dir string) error {
	d, err := fsys.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
