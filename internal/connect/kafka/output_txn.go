package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flowplane/flowplane/internal/message"
)

// In a job the kafka output is exactly-once by Kafka transactions. Each
// sink subtask owns txnSlots transactional ids,
// <prefix>-<operator>-<subtask>-<slot>, each with its own producer, since
// a producer holds one open transaction and the job keeps writing after a
// checkpoint's Prepare, before its Commit:
//
//   - Write produces into the open transaction of the current slot, first
//     beginning one on a free slot;
//   - Prepare flushes it (every record acknowledged, durable, invisible to
//     read_committed consumers) and returns the handle {checkpoint,
//     transactional id, producer id, producer epoch} without ending it;
//   - Commit ends it with EndTxn(commit). A process other than the one that
//     prepared it (a restore after a crash) commits it by sending EndTxn
//     with the handle's ids itself: the coordinator keeps the transaction
//     open until it is ended or transaction_timeout passes.
//
// Begin first commits the restored handles, then fences every slot of this
// identity (and, restored at a lower parallelism, of the subtasks whose
// handles it restored: the ones that are gone) with InitProducerID, which aborts whatever transaction a dead
// process left open there (data written after the restored checkpoint,
// which the job replays). A restored handle the coordinator answers with
// "fenced" or "invalid state" was ended already: Begin commits before it
// fences, so an earlier restore committed it — unless the broker aborted it
// because transaction_timeout passed, which this cannot tell apart.
const txnSlots = 4

// txnHandle is a prepared transaction as Prepare returns it. An empty
// transaction names no id and commits as a no-op.
type txnHandle struct {
	Checkpoint      int64  `json:"checkpoint"`
	TransactionalID string `json:"transactional_id,omitempty"`
	ProducerID      int64  `json:"producer_id,omitempty"`
	ProducerEpoch   int16  `json:"producer_epoch,omitempty"`
	// Operator and Subtask name the sink subtask that prepared it, so that
	// a restore at a lower parallelism fences the slots of the subtasks
	// that are gone (older handles lack them).
	Operator string `json:"operator,omitempty"`
	Subtask  int    `json:"subtask,omitempty"`
}

// txnSlot is one transactional id and its producer.
type txnSlot struct {
	id      string
	cl      *kgo.Client // nil until first used
	pending *txnHandle  // prepared, not committed
}

// txnState is the transactional mode of an Output; nil in a stream.
type txnState struct {
	operator string
	subtask  int
	slots    []*txnSlot
	cur      *txnSlot // the slot whose open transaction Write fills
	// failed is set by a produce that failed in a transaction: part of
	// the batch may be in it, so it cannot be prepared and the job must
	// restart from its last checkpoint.
	failed error
}

// Begin switches the output to transactional mode for the sink operator's
// subtask: it commits the restored transactions and aborts every other
// open transaction of this identity.
func (o *Output) Begin(ctx context.Context, operator string, subtask int, restored [][]byte) error {
	if o.cl == nil {
		return errors.New("kafka output: Begin before Connect")
	}
	if operator == "" || subtask < 0 {
		return fmt.Errorf("kafka output: invalid identity %q/%d", operator, subtask)
	}
	prefix := o.conf.TransactionalID
	if prefix == "" {
		prefix = "flowplane-" + o.jobID
	}
	// The subtasks whose open transactions are fenced: this one and, after
	// a restore at a lower parallelism, those whose transactions subtask 0
	// restores. An open transaction of a subtask that is gone would
	// otherwise hold read_committed consumers back until it times out.
	others := map[int]bool{}
	for _, raw := range restored {
		if err := o.Commit(ctx, raw); err != nil {
			return fmt.Errorf("kafka output: restoring: %w", err)
		}
		var h txnHandle
		if json.Unmarshal(raw, &h) == nil && h.Operator == operator && h.Subtask != subtask {
			others[h.Subtask] = true
		}
	}
	for sub := range others {
		for i := range txnSlots {
			id := slotID(prefix, operator, sub, i)
			if err := o.fence(ctx, id); err != nil {
				return fmt.Errorf("kafka output: fencing transactional id %s: %w", id, err)
			}
		}
	}
	t := &txnState{operator: operator, subtask: subtask}
	for i := range txnSlots {
		s := &txnSlot{id: slotID(prefix, operator, subtask, i)}
		if err := o.fence(ctx, s.id); err != nil {
			return fmt.Errorf("kafka output: fencing transactional id %s: %w", s.id, err)
		}
		t.slots = append(t.slots, s)
	}
	o.txn = t
	return nil
}

// slotID is the transactional id of a sink subtask's slot.
func slotID(prefix, operator string, subtask, slot int) string {
	return prefix + "-" + operator + "-" + strconv.Itoa(subtask) + "-" + strconv.Itoa(slot)
}

// fence bumps the epoch of a transactional id, aborting its open
// transaction.
func (o *Output) fence(ctx context.Context, id string) error {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = int32(o.txnTO.Milliseconds())
	req.ProducerID, req.ProducerEpoch = -1, -1
	return retryCoordinator(ctx, func() (int16, error) {
		resp, err := req.RequestWith(ctx, o.cl)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	})
}

// retryCoordinator runs a transaction coordinator request until it
// succeeds, fails with a non-retriable code, or ctx ends (at most 50
// tries).
func retryCoordinator(ctx context.Context, do func() (int16, error)) error {
	var last error
	for range 50 {
		code, err := do()
		if err != nil {
			return err
		}
		last = kerr.ErrorForCode(code)
		if last == nil {
			return nil
		}
		if !kerr.IsRetriable(last) && !errors.Is(last, kerr.ConcurrentTransactions) {
			return last
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return last
}

// writeTxn produces a batch into the open transaction.
func (o *Output) writeTxn(ctx context.Context, b message.Batch) error {
	t := o.txn
	if t.failed != nil {
		return fmt.Errorf("kafka output: an earlier write failed; the job must restart from its last checkpoint: %w", t.failed)
	}
	recs, err := o.records(ctx, b)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	if t.cur == nil {
		var free *txnSlot
		for _, s := range t.slots {
			if s.pending == nil {
				free = s
				break
			}
		}
		if free == nil {
			return fmt.Errorf("kafka output: %d transactions are prepared and not committed; checkpoints are not completing", txnSlots)
		}
		if free.cl == nil {
			opts := append(o.conf.opts(o.log, o.dial, o.net), o.opts...)
			opts = append(opts, kgo.TransactionalID(free.id), kgo.TransactionTimeout(o.txnTO))
			if free.cl, err = kgo.NewClient(opts...); err != nil {
				return fmt.Errorf("kafka output: %w", err)
			}
		}
		if err := free.cl.BeginTransaction(); err != nil {
			return fmt.Errorf("kafka output: begin transaction: %w", err)
		}
		t.cur = free
	}
	if err := produceErr(t.cur.cl.ProduceSync(ctx, recs...)); err != nil {
		t.failed = err
		return err
	}
	return nil
}

// Prepare flushes the open transaction and returns its handle; with
// nothing written since the last Prepare it returns an empty one.
func (o *Output) Prepare(ctx context.Context, checkpoint int64) ([]byte, error) {
	t := o.txn
	if t == nil {
		return nil, errors.New("kafka output: Prepare before Begin")
	}
	if t.failed != nil {
		return nil, fmt.Errorf("kafka output: an earlier write failed: %w", t.failed)
	}
	h := txnHandle{Checkpoint: checkpoint, Operator: o.txn.operator, Subtask: o.txn.subtask}
	if s := t.cur; s != nil {
		if err := s.cl.Flush(ctx); err != nil {
			return nil, fmt.Errorf("kafka output: flush: %w", err)
		}
		id, epoch, err := s.cl.ProducerID(ctx)
		if err != nil {
			return nil, fmt.Errorf("kafka output: producer id: %w", err)
		}
		h.TransactionalID, h.ProducerID, h.ProducerEpoch = s.id, id, epoch
		s.pending = &h
		t.cur = nil
	}
	return json.Marshal(h)
}

// Commit commits a prepared transaction: through the producer that
// prepared it, or, for one a previous process prepared, by EndTxn with its
// ids. A transaction ended already counts as committed.
func (o *Output) Commit(ctx context.Context, raw []byte) error {
	var h txnHandle
	if err := json.Unmarshal(raw, &h); err != nil {
		return fmt.Errorf("kafka output: transaction %s: %w", raw, err)
	}
	if h.TransactionalID == "" {
		return nil
	}
	if o.txn != nil {
		for _, s := range o.txn.slots {
			if p := s.pending; p != nil && s.id == h.TransactionalID && p.ProducerID == h.ProducerID && p.ProducerEpoch == h.ProducerEpoch {
				if err := s.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					return fmt.Errorf("kafka output: committing checkpoint %d: %w", h.Checkpoint, err)
				}
				s.pending = nil
				return nil
			}
		}
	}
	return o.endTxn(ctx, h)
}

// endTxn commits h by an EndTxn request with its producer id and epoch.
func (o *Output) endTxn(ctx context.Context, h txnHandle) error {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = h.TransactionalID, h.ProducerID, h.ProducerEpoch, true
	err := retryCoordinator(ctx, func() (int16, error) {
		resp, err := req.RequestWith(ctx, o.cl)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch),
		errors.Is(err, kerr.InvalidTxnState), errors.Is(err, kerr.InvalidProducerIDMapping):
		o.log.Warn("kafka output: a restored transaction was ended already; taking it as committed by an earlier restore",
			"transactional_id", h.TransactionalID, "checkpoint", h.Checkpoint, "answer", err)
		return nil
	default:
		return fmt.Errorf("kafka output: committing checkpoint %d (transactional id %s): %w", h.Checkpoint, h.TransactionalID, err)
	}
}

// closeTxn closes the transactional producers without ending their
// transactions: a restore commits the prepared ones, the next Begin aborts
// the rest.
func (o *Output) closeTxn() {
	if o.txn == nil {
		return
	}
	for _, s := range o.txn.slots {
		if s.cl != nil {
			s.cl.Close()
			s.cl = nil
		}
	}
	o.txn.cur = nil
}
