package wal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/message"
)

// BenchmarkAppend measures appends of 100-byte messages with fsync as each
// mode defines it, acknowledging every entry once durable. msgs/s counts
// messages, which differ from entries only in the batch cases.
func BenchmarkAppend(b *testing.B) {
	msg := make([]byte, 100)
	batch := func(n int) []byte {
		var bt message.Batch
		for range n {
			m := message.New(msg)
			m.Meta.Offset = 1 << 30
			m.Meta.IngestTime = time.Now()
			bt.Messages = append(bt.Messages, m)
		}
		enc, err := EncodeBatch(nil, bt)
		if err != nil {
			b.Fatal(err)
		}
		return enc
	}
	for _, mode := range allModes {
		b.Run(string(mode)+"/sequential", func(b *testing.B) {
			benchSequential(b, mode, msg)
		})
	}
	for _, window := range []int{64, 1024} {
		b.Run(fmt.Sprintf("group_commit/pipelined-%d", window), func(b *testing.B) {
			benchPipelined(b, SyncGroupCommit, msg, 1, window)
		})
	}
	b.Run("group_commit/parallel-128", func(b *testing.B) {
		w := openBench(b, SyncGroupCommit)
		b.SetParallelism(64) // 64 goroutines per CPU, each with one append in flight
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				seq, err := w.Append(context.Background(), msg)
				if err != nil {
					b.Error(err)
					return
				}
				if err := w.Ack(seq); err != nil {
					b.Error(err)
					return
				}
			}
		})
		report(b, w, b.N)
	})
	for _, n := range []int{16, 64} {
		b.Run(fmt.Sprintf("group_commit/batch%d-pipelined-64", n), func(b *testing.B) {
			benchPipelined(b, SyncGroupCommit, batch(n), n, 64)
		})
	}
	b.Run("periodic/pipelined-1024", func(b *testing.B) {
		benchPipelined(b, SyncPeriodic, msg, 1, 1024)
	})
}

func openBench(b *testing.B, mode SyncMode) *WAL {
	b.Helper()
	w, _, err := Open(Options{Dir: b.TempDir(), Sync: mode})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close() })
	return w
}

func benchSequential(b *testing.B, mode SyncMode, data []byte) {
	w := openBench(b, mode)
	b.SetBytes(int64(len(data)))
	n := 0
	for b.Loop() {
		seq, err := w.Append(context.Background(), data)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Ack(seq); err != nil {
			b.Fatal(err)
		}
		n++
	}
	report(b, w, n)
}

// benchPipelined keeps window appends in flight from one goroutine, as a
// stream reading ahead of its pipeline does.
func benchPipelined(b *testing.B, mode SyncMode, data []byte, msgsPerEntry, window int) {
	w := openBench(b, mode)
	b.SetBytes(int64(len(data)))
	type op struct {
		seq uint64
		ch  <-chan error
	}
	ring := make([]op, 0, window)
	head := 0
	wait := func(o op) {
		if err := <-o.ch; err != nil {
			b.Fatal(err)
		}
		if err := w.Ack(o.seq); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	for b.Loop() {
		seq, ch := w.AppendAsync(data)
		if len(ring) < window {
			ring = append(ring, op{seq, ch})
		} else {
			wait(ring[head])
			ring[head] = op{seq, ch}
			head = (head + 1) % window
		}
		n++
	}
	for i := range ring {
		wait(ring[(head+i)%len(ring)])
	}
	report(b, w, n*msgsPerEntry)
}

func report(b *testing.B, w *WAL, msgs int) {
	st := w.Stats()
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
	if st.Appended > 0 {
		b.ReportMetric(float64(st.Appended)/float64(max(st.Fsyncs, 1)), "entries/fsync")
	}
}

func BenchmarkBatchCodec(b *testing.B) {
	var bt message.Batch
	for i := range 64 {
		m := message.New(make([]byte, 100))
		m.Meta.Key = []byte(fmt.Sprintf("key-%d", i))
		m.Meta.Source = "bench"
		m.Meta.Offset = int64(i)
		m.Meta.IngestTime = time.Now()
		bt.Messages = append(bt.Messages, m)
	}
	enc, err := EncodeBatch(nil, bt)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode-64", func(b *testing.B) {
		b.SetBytes(int64(len(enc)))
		buf := make([]byte, 0, len(enc))
		n := 0
		for b.Loop() {
			if buf, err = EncodeBatch(buf[:0], bt); err != nil {
				b.Fatal(err)
			}
			n++
		}
		b.ReportMetric(float64(n*64)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("decode-64", func(b *testing.B) {
		b.SetBytes(int64(len(enc)))
		n := 0
		for b.Loop() {
			if _, err := DecodeBatch(enc); err != nil {
				b.Fatal(err)
			}
			n++
		}
		b.ReportMetric(float64(n*64)/b.Elapsed().Seconds(), "msgs/s")
	})
}
