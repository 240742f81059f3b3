package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestReadTransactionsHoldingEveryConnection: when every pooled read
// connection is held by a read transaction and each runs a statement not
// yet in the cache, all must finish. Preparing the missing statement on the
// pool waited for a free connection that none of them would give back.
func TestReadTransactionsHoldingEveryConnection(t *testing.T) {
	s, _ := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	const conns = 4 // s.rdb's MaxOpenConns
	var inTx, wg sync.WaitGroup
	inTx.Add(conns)
	errs := make(chan error, conns)
	for i := range conns {
		wg.Go(func() {
			err := s.readTx(ctx, func(q querier) error {
				inTx.Done()
				inTx.Wait() // every connection is now in a transaction
				var n int
				return q.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) + %d FROM intents", i)).Scan(&n)
			})
			if err != nil {
				errs <- fmt.Errorf("reader %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
