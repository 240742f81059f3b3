package dataplane

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkStream sends batches over one stream on loopback: 64 KiB ones
// (the figure of record) and small ones (the flush and credit path).
func BenchmarkStream(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) { benchStream(b, size) })
	}
}

func benchStream(b *testing.B, size int) {
	p := newPair(b, nil)
	ctx := ctxT(b, 5*time.Minute)
	r, err := p.mb.Receive("a", "bench", "bench")
	if err != nil {
		b.Fatal(err)
	}
	s, err := p.ma.Send(ctx, "b", "bench", "bench")
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() {
		for range b.N {
			if err := s.Send(ctx, Frame{Kind: KindBatch, Payload: payload}); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for range b.N {
		if _, err := r.Recv(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}
