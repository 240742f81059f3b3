package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"syscall"
)

// BenchmarkWriteDesired measures durable desired-state writes from 32
// goroutines per GOMAXPROCS (SetParallelism(32)) over 64 resources; the
// writes/txn metric shows how many share one commit and one fsync.
func BenchmarkWriteDesired(b *testing.B) {
	s, _ := openTest(b)
	ctx := context.Background()
	var n atomic.Int64
	before := s.Stats()
	b.SetParallelism(32)
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := s.WriteDesired(ctx, dw(fmt.Sprint("i", i), "n1", fmt.Sprint("s", i%64), t0)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/write")
	st := s.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	if txns := st.Transactions - before.Transactions; txns > 0 {
		b.ReportMetric(float64(st.Writes-before.Writes)/float64(txns), "writes/txn")
	}
}

// cpuTime is the CPU time this process has used: on a machine shared with
// other work, CPU per write compares builds where writes/s does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFsync measures the machine's raw durable-write rate: 4 KiB
// written and fdatasync'd per iteration.
func BenchmarkFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.WriteAt(buf, int64(i%256)*4096); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
}
