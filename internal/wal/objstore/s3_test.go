package objstore

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"
)

// fakeS3 serves an S3-compatible API (gofakes3, in memory) on 127.0.0.1
// with bucket "fp-wal" and returns its endpoint.
func fakeS3(tb testing.TB) string {
	tb.Helper()
	be := s3mem.New()
	if err := be.CreateBucket("fp-wal"); err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(gofakes3.New(be).Server())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	tb.Cleanup(srv.Close)
	return srv.URL
}

func s3Bucket(tb testing.TB, endpoint string) *blob.Bucket {
	tb.Helper()
	b, err := OpenS3(context.Background(), S3{
		Bucket: "fp-wal", Region: "us-east-1", Endpoint: endpoint,
		AccessKeyID: "local-key", SecretAccessKey: "local-secret",
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestS3 runs the WAL against an S3-compatible server with static
// credentials and compression: concurrent appends, some acknowledged,
// Close, reopen, and the rest is replayed.
func TestS3(t *testing.T) {
	ep := fakeS3(t)
	opts := Options{Prefix: "fp/wal/n1/s1", Workers: 3, MaxEntries: 10, Compression: Compression{Codec: CodecZstd, Level: 5}}
	opts.Bucket = s3Bucket(t, ep)
	w, _, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	seqs := make([]uint64, 50)
	for i := range seqs {
		wg.Go(func() {
			seq, err := w.Append(context.Background(), fmt.Appendf(nil, "%05d%s", i, make([]byte, 1000)))
			if err != nil {
				t.Error(err)
			}
			seqs[i] = seq
		})
	}
	wg.Wait()
	for s := uint64(1); s <= 20; s++ {
		if err := w.Ack(s); err != nil {
			t.Fatal(err)
		}
	}
	if st := w.Stats(); st.Puts < 5 || st.Appended != 50 {
		t.Fatalf("stats %+v, want at least 5 PUTs of at most 10 entries", st)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	opts.Bucket = s3Bucket(t, ep)
	w, rec, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if rec.Cursor != 21 || rec.Pending != 30 || rec.CorruptSegments != 0 {
		t.Fatalf("recovery %+v, want cursor 21 and 30 pending", rec)
	}
	var got []uint64
	if err := w.Replay(context.Background(), func(seq uint64, data []byte) error {
		got = append(got, seq)
		if len(data) != 1005 {
			t.Errorf("entry %d: %d bytes", seq, len(data))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for s := uint64(21); s <= 50; s++ {
		want = append(want, s)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("replayed (-want +got):\n%s", diff)
	}
}

// BenchmarkObjectStoreWAL measures appends per second with group commit:
// 64 writers append 200-byte entries concurrently, each waiting for its
// PUT, on a file:// bucket and on gofakes3.
func BenchmarkObjectStoreWAL(b *testing.B) {
	for _, bk := range []string{"file", "gofakes3"} {
		b.Run(bk, func(b *testing.B) {
			opts := Options{Prefix: "bench", Workers: 2}
			if bk == "file" {
				opts.Bucket = fileBucket(b, b.TempDir())
			} else {
				opts.Bucket = s3Bucket(b, fakeS3(b))
			}
			w, _, err := Open(context.Background(), opts)
			if err != nil {
				b.Fatal(err)
			}
			entry := make([]byte, 200)
			b.SetParallelism(64)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					seq, err := w.Append(context.Background(), entry)
					if err != nil {
						b.Error(err)
						return
					}
					_ = w.Ack(seq)
				}
			})
			b.StopTimer()
			st := w.Stats()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			b.ReportMetric(float64(st.Puts)/float64(b.N), "puts/append")
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
