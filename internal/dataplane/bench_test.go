package dataplane

import (
	"testing"
	"time"
)

// BenchmarkStream sends 64 KiB batches over one stream on loopback.
func BenchmarkStream(b *testing.B) {
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
	payload := make([]byte, 64<<10)
	b.SetBytes(int64(len(payload)))
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
