package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowplane/flowplane/internal/message"
)

// A stream's kafka output with exactly_once writes each batch in one Kafka
// transaction of its own: begin, produce every record, commit. A batch is
// thus atomic: a read_committed consumer sees all of its records or none.
// When a record fails, the transaction is aborted and Write returns the
// error, so the runtime retries the whole batch and nothing of the failed
// attempt is visible. When the abort itself fails (or the producer is in
// a state it cannot leave), the producer is closed: the next Write makes
// a new one, whose InitProducerID fences the old epoch and makes the
// coordinator abort the transaction it left open.
//
// This is not end-to-end exactly-once: the input is acknowledged after
// Write returned, so a crash between the commit and that acknowledgement
// makes an at-least-once input deliver the batch again, and it is written
// twice (each copy atomic). Jobs, whose transactions commit with the
// checkpoint that records the input's position, give end-to-end
// exactly-once.

// abortTimeout bounds an abort after a failed write.
const abortTimeout = 30 * time.Second

// eosID is the transactional id of a stream's output.
func (o *Output) eosID() string {
	prefix := o.conf.TransactionalID
	if prefix == "" {
		prefix = "flowplane"
	}
	return prefix + "-" + o.jobID
}

// writeEOS writes b in one transaction.
func (o *Output) writeEOS(ctx context.Context, b message.Batch) error {
	recs, err := o.records(ctx, b)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	if o.eos == nil {
		opts := append(o.conf.opts(o.log, o.dial, o.net), o.opts...)
		opts = append(opts, kgo.TransactionalID(o.eosID()), kgo.TransactionTimeout(o.txnTO))
		if o.eos, err = kgo.NewClient(opts...); err != nil {
			return fmt.Errorf("kafka output: %w", err)
		}
	}
	if err := o.eos.BeginTransaction(); err != nil {
		o.closeEOS()
		return fmt.Errorf("kafka output: begin transaction: %w", err)
	}
	if err := produceErr(o.eos.ProduceSync(ctx, recs...)); err != nil {
		o.abortEOS(ctx)
		return err
	}
	if err := o.eos.EndTransaction(ctx, kgo.TryCommit); err != nil {
		o.abortEOS(ctx)
		return fmt.Errorf("kafka output: commit: %w", err)
	}
	return nil
}

// abortEOS aborts the open transaction after a failed produce or commit;
// when it cannot, it closes the producer so that the next one fences it.
func (o *Output) abortEOS(ctx context.Context) {
	// Abort even when the write was cancelled, for a bounded time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	err := o.eos.AbortBufferedRecords(ctx)
	if err == nil {
		err = o.eos.EndTransaction(ctx, kgo.TryAbort)
	}
	if err != nil {
		o.log.Warn("kafka output: aborting a transaction failed; the next write fences it with a new producer",
			"transactional_id", o.eosID(), "err", err)
		o.closeEOS()
	}
}

// closeEOS closes the stream's transactional producer; a transaction it
// left open is aborted when the next producer of its id starts (or by the
// broker after transaction_timeout).
func (o *Output) closeEOS() {
	if o.eos != nil {
		o.eos.Close()
		o.eos = nil
	}
}
