package engine

import (
	"context"

	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/wal"
)

// streamWAL adapts the byte-level WAL to the stream runtime's batch hook.
type streamWAL struct {
	w *wal.WAL
}

func (s *streamWAL) Append(ctx context.Context, b message.Batch) (uint64, error) {
	data, err := wal.EncodeBatch(nil, b)
	if err != nil {
		return 0, err
	}
	return s.w.Append(ctx, data)
}

func (s *streamWAL) Ack(seq uint64) error { return s.w.Ack(seq) }

func (s *streamWAL) Replay(ctx context.Context, fn func(seq uint64, b message.Batch) error) error {
	return s.w.Replay(func(seq uint64, data []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := wal.DecodeBatch(data)
		if err != nil {
			return err
		}
		return fn(seq, b)
	})
}

func (s *streamWAL) Close() error { return s.w.Close() }
