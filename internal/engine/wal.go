package engine

import (
	"context"
	"errors"

	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/wal"
)

// streamWAL adapts the byte-level WAL to the stream runtime's batch hook.
// An entry's size is the length of its encoded batch.
type streamWAL struct {
	w           *wal.WAL
	replayBytes int64
	rd          *wal.Reader  // created by the first Read; used by the stream's feeder only
	release     func() error // lets go of the pinned directory (walFor)
}

func (s *streamWAL) Append(b message.Batch) (uint64, int64, <-chan error) {
	return appendBatch(s.w, b)
}

// asyncLog is what both WALs (local and object-store) offer a stream.
type asyncLog interface {
	AppendAsync(data []byte) (uint64, <-chan error)
}

// appendBatch encodes b and appends it; an encoding error comes back on
// the done channel like a failed write.
func appendBatch(l asyncLog, b message.Batch) (uint64, int64, <-chan error) {
	data, err := wal.EncodeBatch(nil, b)
	if err != nil {
		ch := make(chan error, 1)
		ch <- err
		return 0, 0, ch
	}
	seq, done := l.AppendAsync(data)
	return seq, int64(len(data)), done
}

func (s *streamWAL) Ack(seq uint64) error { return s.w.Ack(seq) }

func (s *streamWAL) ReplayBytes() int64 { return s.replayBytes }

func (s *streamWAL) Replay(ctx context.Context, fn func(seq uint64, b message.Batch, size int64) error) error {
	return s.w.Replay(func(seq uint64, data []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := wal.DecodeBatch(data)
		if err != nil {
			return err
		}
		return fn(seq, b, int64(len(data)))
	})
}

func (s *streamWAL) Read(ctx context.Context, from, limit uint64) (uint64, message.Batch, int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, message.Batch{}, 0, false, err
	}
	if s.rd == nil {
		s.rd = s.w.NewReader()
	}
	seq, data, ok, err := s.rd.Next(from, limit)
	if err != nil || !ok {
		return 0, message.Batch{}, 0, false, err
	}
	b, err := wal.DecodeBatch(data)
	if err != nil {
		return 0, message.Batch{}, 0, false, err
	}
	return seq, b, int64(len(data)), true, nil
}

// Close closes the WAL. The stream no longer runs.
func (s *streamWAL) Close() error {
	if s.rd != nil {
		s.rd.Close()
	}
	err := s.w.Close()
	if s.release != nil {
		err = errors.Join(err, s.release())
	}
	return err
}
