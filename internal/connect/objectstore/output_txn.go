package objectstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// In a job the object_store output is exactly-once by two-phase commit.
// Begin switches it to transactional mode:
//
//   - Write stores each batch under a pending key,
//     _pending/<operator>-<subtask>/<uuid>, and remembers the key its path
//     template gave it;
//   - Prepare returns the pending and final keys written since the last
//     Prepare (the objects are durable already, not visible);
//   - Commit copies each pending object to its final key and deletes the
//     pending one. A pending object that is gone while its final key exists
//     was committed before: Commit is idempotent.
//
// Begin commits the restored transactions and deletes every other pending
// object of this operator and subtask: data after the restored checkpoint,
// which the job replays.

// pendingDir is the key prefix, under the bucket URL, of pending objects.
const pendingDir = "_pending/"

// txnObject is one batch of a transaction.
type txnObject struct {
	Pending string `json:"pending"`
	Final   string `json:"final"`
}

// objectTxn is the handle of a prepared transaction, as Prepare returns it.
type objectTxn struct {
	Checkpoint int64       `json:"checkpoint"`
	Objects    []txnObject `json:"objects,omitempty"`
}

// txnState is the transactional mode of an Output; nil in a stream.
type txnState struct {
	prefix  string // _pending/<operator>-<subtask>/
	written []txnObject
}

// Begin switches the output to transactional mode for the sink operator's
// subtask, commits the restored transactions and discards the other
// pending objects of this operator and subtask.
func (o *Output) Begin(ctx context.Context, operator string, subtask int, restored [][]byte) error {
	if operator == "" || strings.ContainsAny(operator, "/\x00") {
		return fmt.Errorf("object_store output: operator id %q cannot be part of a key", operator)
	}
	if subtask < 0 {
		return fmt.Errorf("object_store output: subtask %d is negative", subtask)
	}
	if o.bucket == nil {
		return errors.New("object_store output: Begin before Connect")
	}
	o.txn = &txnState{prefix: fmt.Sprintf("%s%s-%d/", pendingDir, operator, subtask)}
	for _, raw := range restored {
		if err := o.Commit(ctx, raw); err != nil {
			return fmt.Errorf("object_store output: restoring: %w", err)
		}
	}
	it := o.bucket.List(&blob.ListOptions{Prefix: o.txn.prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("object_store output: listing pending objects: %w", err)
		}
		if err := o.bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("object_store output: discarding an uncommitted object: %w", err)
		}
	}
}

// Prepare seals the objects written since the last Prepare into a
// transaction.
func (o *Output) Prepare(ctx context.Context, checkpoint int64) ([]byte, error) {
	if o.txn == nil {
		return nil, errors.New("object_store output: Prepare before Begin")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	txn := objectTxn{Checkpoint: checkpoint, Objects: o.txn.written}
	o.txn.written = nil
	return json.Marshal(txn)
}

// Commit copies each pending object of the transaction to its final key
// and deletes it.
func (o *Output) Commit(ctx context.Context, raw []byte) error {
	var txn objectTxn
	if err := json.Unmarshal(raw, &txn); err != nil {
		return fmt.Errorf("object_store output: transaction %s: %w", raw, err)
	}
	if o.bucket == nil {
		return errors.New("object_store output: Commit before Connect")
	}
	for _, obj := range txn.Objects {
		if !strings.HasPrefix(obj.Pending, pendingDir) || obj.Final == "" {
			return fmt.Errorf("object_store output: transaction %s names a bad object", raw)
		}
		err := o.bucket.Copy(ctx, obj.Final, obj.Pending, nil)
		if gcerrors.Code(err) == gcerrors.NotFound {
			ok, eerr := o.bucket.Exists(ctx, obj.Final)
			if eerr != nil {
				return fmt.Errorf("object_store output: committing checkpoint %d: %w", txn.Checkpoint, eerr)
			}
			if ok {
				continue // committed before
			}
			return fmt.Errorf("object_store output: committing checkpoint %d: neither %s nor %s exists",
				txn.Checkpoint, obj.Pending, obj.Final)
		}
		if err != nil {
			return fmt.Errorf("object_store output: committing checkpoint %d: %w", txn.Checkpoint, err)
		}
		if err := o.bucket.Delete(ctx, obj.Pending); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("object_store output: committing checkpoint %d: %w", txn.Checkpoint, err)
		}
	}
	return nil
}

// pendingKey names the pending object of a new batch.
func (t *txnState) pendingKey() string { return t.prefix + uuid.NewString() }
