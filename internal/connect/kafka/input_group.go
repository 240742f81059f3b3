package kafka

import (
	"context"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flowplane/flowplane/internal/message"
)

// span is the part of one read batch in one partition: acknowledged or
// not, and the offset after its last record.
type span struct {
	pt   *partTrack
	end  kgo.EpochOffset
	done bool
}

// partTrack is the acknowledgement state of one assigned partition.
type partTrack struct {
	tp        topicPartition
	spans     []*span         // read and not yet committable, oldest first
	acked     kgo.EpochOffset // offset after the acknowledged prefix
	committed int64           // last offset committed, -1 for none
}

// tracker turns out-of-order acknowledgements into commit offsets: a
// partition's offset advances only over a prefix of acknowledged spans, so
// a commit never skips a record that was not acknowledged.
type tracker struct {
	mu    sync.Mutex // guards parts and everything they hold
	parts map[topicPartition]*partTrack
}

// add records a read batch's end offset per partition and returns its spans.
func (t *tracker) add(ends map[topicPartition]kgo.EpochOffset) []*span {
	t.mu.Lock()
	defer t.mu.Unlock()
	spans := make([]*span, 0, len(ends))
	for tp, end := range ends {
		pt := t.parts[tp]
		if pt == nil {
			pt = &partTrack{tp: tp, committed: -1, acked: kgo.EpochOffset{Epoch: -1, Offset: -1}}
			t.parts[tp] = pt
		}
		s := &span{pt: pt, end: end}
		pt.spans = append(pt.spans, s)
		spans = append(spans, s)
	}
	return spans
}

// ack marks spans acknowledged and reports whether an offset advanced.
// Spans of partitions revoked since they were read are ignored: the new
// owner reads those records again.
func (t *tracker) ack(spans []*span) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	advanced := false
	for _, s := range spans {
		s.done = true
		pt := s.pt
		if t.parts[pt.tp] != pt {
			continue
		}
		n := 0
		for n < len(pt.spans) && pt.spans[n].done {
			pt.acked = pt.spans[n].end
			n++
		}
		if n > 0 {
			pt.spans = pt.spans[n:]
			advanced = true
		}
	}
	return advanced
}

// committable returns the acknowledged offsets not yet committed, of the
// partitions in only (all when nil).
func (t *tracker) committable(only map[string][]int32) map[string]map[int32]kgo.EpochOffset {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]map[int32]kgo.EpochOffset{}
	for tp, pt := range t.parts {
		if pt.acked.Offset <= pt.committed {
			continue
		}
		if only != nil && !containsPartition(only, tp) {
			continue
		}
		if out[tp.Topic] == nil {
			out[tp.Topic] = map[int32]kgo.EpochOffset{}
		}
		out[tp.Topic][tp.Partition] = pt.acked
	}
	return out
}

// committed records offsets as committed.
func (t *tracker) committed(offs map[string]map[int32]kgo.EpochOffset) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for topic, parts := range offs {
		for p, o := range parts {
			if pt := t.parts[topicPartition{topic, p}]; pt != nil && o.Offset > pt.committed {
				pt.committed = o.Offset
			}
		}
	}
}

// drop forgets partitions the group took away.
func (t *tracker) drop(parts map[string][]int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for topic, ps := range parts {
		for _, p := range ps {
			delete(t.parts, topicPartition{topic, p})
		}
	}
}

func containsPartition(m map[string][]int32, tp topicPartition) bool {
	for _, p := range m[tp.Topic] {
		if p == tp.Partition {
			return true
		}
	}
	return false
}

// commitLoop commits acknowledged offsets whenever an acknowledgement
// advances one, until ctx ends.
func (in *Input) commitLoop(ctx context.Context, cl *kgo.Client, t *tracker, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-in.wake:
		}
		in.commit(ctx, cl, t.committable(nil))
	}
}

// commit commits offs synchronously, logging a failure: the offsets stay
// uncommitted and go with the next commit.
func (in *Input) commit(ctx context.Context, cl *kgo.Client, offs map[string]map[int32]kgo.EpochOffset) {
	if len(offs) == 0 {
		return
	}
	var failed error
	cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			failed = err
			return
		}
		for _, tr := range resp.Topics {
			for _, p := range tr.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					failed = err
					delete(offs[tr.Topic], p.Partition)
				}
			}
		}
	})
	if failed != nil {
		if ctx.Err() == nil {
			in.log.Warn("kafka input: committing offsets failed; they go with the next commit", "group", in.conf.ConsumerGroup, "error", failed)
		}
		return
	}
	in.track.committed(offs)
}

// revoked commits the acknowledged offsets of partitions the group takes
// away, then forgets them.
func (in *Input) revoked(ctx context.Context, cl *kgo.Client, parts map[string][]int32) {
	in.commit(ctx, cl, in.track.committable(parts))
	in.track.drop(parts)
}

// lost forgets partitions lost without a chance to commit (the session
// expired): their records since the last commit are read again by the new
// owner.
func (in *Input) lost(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	in.track.drop(parts)
}

// redelivery keeps batches whose acknowledgement failed so that the next
// Read hands them out again before new records.
type redelivery struct {
	log *slog.Logger

	mu    sync.Mutex // guards queue, ended
	queue []pendingBatch
	ended bool
}

type pendingBatch struct {
	b     message.Batch
	spans []*span
}

func (r *redelivery) push(b message.Batch, spans []*span, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		r.log.Warn("kafka input: a batch failed after the input closed; its records are read again after a restart from the committed offsets",
			"messages", b.Len(), "error", err)
		return
	}
	r.log.Warn("kafka input: batch failed; redelivering it", "messages", b.Len(), "error", err)
	r.queue = append(r.queue, pendingBatch{b, spans})
}

func (r *redelivery) next() (message.Batch, []*span, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return message.Batch{}, nil, false
	}
	p := r.queue[0]
	r.queue[0] = pendingBatch{}
	r.queue = r.queue[1:]
	return p.b, p.spans, true
}

func (r *redelivery) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = true
}
