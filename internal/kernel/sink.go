package kernel

import (
	"context"
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/operator"
	"github.com/flowplane/flowplane/internal/state"
)

// sinkWriteAttempts is how often a failed Write is tried before the task
// fails (and the job recovers from its last checkpoint).
const sinkWriteAttempts = 5

// sinkOp is a sink operator: it writes records to its output and, for a
// Transactional output, prepares a transaction at every checkpoint and
// commits it once the checkpoint is durable.
type sinkOp struct {
	id         string
	subtask    int
	out        component.Output
	tx         component.Transactional // nil for an at-least-once output
	maxPending int
	now        func() time.Time // the job's clock (Options.Now)
	sleep      func(context.Context, time.Duration) error

	pending  []state.SinkTxn // prepared, not committed, oldest first
	prepared []state.SinkTxn // prepared at the last Snapshot
	lastSeq  int64           // the number of the last commitNow
}

var _ operator.Operator = (*sinkOp)(nil)

func (s *sinkOp) Open(context.Context, *operator.Context) error { return nil }

func (s *sinkOp) Process(ctx context.Context, in []operator.Record, _ operator.Collector) error {
	b := message.Batch{Messages: make([]message.Message, len(in))}
	for i := range in {
		if p, ok := in[i].Value.([]byte); ok {
			b.Messages[i] = message.New(p)
		} else {
			b.Messages[i] = message.NewStructured(in[i].Value)
		}
		if in[i].Time != operator.NoTime {
			b.Messages[i].Meta.Timestamp = time.UnixMilli(in[i].Time)
		}
	}
	var err error
	wait := 100 * time.Millisecond
	for a := 0; a < sinkWriteAttempts; a++ {
		if err = s.out.Write(ctx, b); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		if a < sinkWriteAttempts-1 {
			if serr := s.sleep(ctx, wait); serr != nil {
				return err
			}
			wait *= 2
		}
	}
	return fmt.Errorf("sink %s: write failed %d times: %w", s.id, sinkWriteAttempts, err)
}

func (s *sinkOp) OnWatermark(context.Context, int64, operator.Collector) error { return nil }

// Snapshot prepares a transaction of what was written since the last one.
func (s *sinkOp) Snapshot(ctx context.Context, checkpoint int64) error {
	s.prepared = s.prepared[:0]
	if s.tx == nil {
		return nil
	}
	txn, err := s.tx.Prepare(ctx, checkpoint)
	if err != nil {
		return fmt.Errorf("sink %s: prepare at checkpoint %d: %w", s.id, checkpoint, err)
	}
	t := state.SinkTxn{Operator: s.id, Subtask: s.subtask, Checkpoint: checkpoint, Txn: txn}
	s.pending = append(s.pending, t)
	s.prepared = append(s.prepared, t)
	if s.maxPending > 0 && len(s.pending) > s.maxPending {
		return fmt.Errorf("sink %s subtask %d holds %d prepared transactions not yet committed, more than state.max_pending_transactions (%d): checkpoints are not completing",
			s.id, s.subtask, len(s.pending), s.maxPending)
	}
	return nil
}

// Commit commits every transaction prepared at or before checkpoint.
func (s *sinkOp) Commit(ctx context.Context, checkpoint int64) error {
	n := 0
	for _, t := range s.pending {
		if t.Checkpoint > checkpoint {
			break
		}
		if err := s.tx.Commit(ctx, t.Txn); err != nil {
			s.pending = s.pending[n:]
			return fmt.Errorf("sink %s: commit of checkpoint %d: %w", s.id, t.Checkpoint, err)
		}
		n++
	}
	s.pending = s.pending[n:]
	return nil
}

// commitNow prepares and commits at once: how a job without checkpoints
// makes a transactional sink's output visible. Each such transaction takes
// the place of a checkpoint id, so each needs its own number, increasing
// within a run and above the last run's: a sink names its committed data
// by it (the file output's part files), and a repeated number would replace
// what an earlier commit made visible. The number is the job's clock in
// nanoseconds, kept above the last one.
func (s *sinkOp) commitNow(ctx context.Context) error {
	if s.tx == nil {
		return nil
	}
	s.lastSeq = max(s.lastSeq+1, s.now().UnixNano())
	txn, err := s.tx.Prepare(ctx, s.lastSeq)
	if err != nil {
		return fmt.Errorf("sink %s: prepare: %w", s.id, err)
	}
	if err := s.tx.Commit(ctx, txn); err != nil {
		return fmt.Errorf("sink %s: commit: %w", s.id, err)
	}
	return nil
}

func (s *sinkOp) Close(context.Context) error { return nil }
