package state

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/job"
)

// BenchmarkStorePut measures the barrier write path: 100k entries of
// ~32-byte values put into the pending batch, then flushed.
func BenchmarkStorePut(b *testing.B) {
	const keys = 100_000
	s := openStore(b, b.TempDir())
	defer s.Close()
	tb := s.Table("agg", "sums")
	value := make([]byte, 32)
	key := make([]byte, 8)
	b.ResetTimer()
	for i := range b.N {
		for k := range keys {
			binary.BigEndian.PutUint64(key, uint64(k))
			binary.BigEndian.PutUint64(value, uint64(i))
			if err := tb.Put(k%128, key, value); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(keys)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkCheckpointUpload measures shipping a store of STATE_BENCH_BYTES
// (default 64 MiB): Checkpoint+Upload to file://, and Download+Restore.
func BenchmarkCheckpointUpload(b *testing.B) {
	size := int64(64 << 20)
	if v := os.Getenv("STATE_BENCH_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("STATE_BENCH_BYTES: %v", err)
		}
		size = n
	}
	ctx := context.Background()
	dir := b.TempDir()
	s := openStore(b, filepath.Join(dir, "store"))
	defer s.Close()
	tb := s.Table("agg", "sums")
	value := make([]byte, 1024)
	rng := rand.NewChaCha8([32]byte{})
	for i := int64(0); i*int64(len(value)) < size; i++ {
		rng.Read(value) // incompressible, so uploaded bytes are state bytes
		if err := tb.Put(int(i%128), fmt.Appendf(nil, "key%012d", i), value); err != nil {
			b.Fatal(err)
		}
		if i%10_000 == 0 {
			if err := s.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	a, err := OpenArtifacts(ctx, "file://"+filepath.ToSlash(filepath.Join(dir, "artifacts")))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()

	var up, down time.Duration
	var bytes int64
	b.ResetTimer()
	for i := range b.N {
		cp := filepath.Join(dir, fmt.Sprintf("cp%d", i))
		start := time.Now()
		if err := s.Checkpoint(cp); err != nil {
			b.Fatal(err)
		}
		prefix := Prefix("bench", KindCheckpoint, int64(i)) + "agg#0/"
		n, err := a.Upload(ctx, prefix, cp)
		if err != nil {
			b.Fatal(err)
		}
		up += time.Since(start)
		bytes += n

		start = time.Now()
		dl := filepath.Join(dir, fmt.Sprintf("dl%d", i))
		if err := a.Download(ctx, prefix, dl); err != nil {
			b.Fatal(err)
		}
		r := openStore(b, filepath.Join(dir, fmt.Sprintf("restored%d", i)))
		if err := Restore(r, []string{dl}, job.Range{Start: 0, End: 127}); err != nil {
			b.Fatal(err)
		}
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
		down += time.Since(start)
	}
	b.ReportMetric(float64(bytes)/1e6/up.Seconds(), "checkpoint+upload-MB/s")
	b.ReportMetric(float64(bytes)/1e6/down.Seconds(), "download+restore-MB/s")
}
