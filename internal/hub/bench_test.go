package hub

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHTTPDesiredWrites measures durable desired-state writes through
// the HTTP API of a Hub whose SQLite file is on disk: 32 clients, one
// request in flight each, over 1,024 resources. It reports writes/s, the
// p50 and p99 latency and writes/txn (how many writes share one commit and
// one fsync). bench/hubwrites runs the same load against the binary and
// sets it against the disk's raw fsync rate.
func BenchmarkHTTPDesiredWrites(b *testing.B) {
	const (
		clients   = 32
		resources = 1024
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := New(ctx, Options{
		Settings: Settings{Address: "127.0.0.1:0", Storage: filepath.Join(b.TempDir(), "hub.db"), OperatorToken: "bench-token"},
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
		_ = h.Close()
	}()
	base := "http://" + ln.Addr().String()
	tr := &http.Transport{MaxIdleConns: 2 * clients, MaxIdleConnsPerHost: 2 * clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: 30 * time.Second, Transport: tr}

	var next atomic.Int64
	put := func(i int64) (time.Duration, error) {
		r := i % resources
		u := fmt.Sprintf("%s/api/v1/nodes/node-%d/streams/s-%d/desired-state", base, r%16, r)
		body := fmt.Sprintf(`{"state":%q,"config_version":"v%d"}`, []string{"running", "stopped"}[i%2], i)
		req, err := http.NewRequest(http.MethodPut, u, strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer bench-token")
		req.Header.Set("Content-Type", "application/json")
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusAccepted {
			err = fmt.Errorf("PUT %s: status %d", u, resp.StatusCode)
		}
		return time.Since(t0), err
	}
	// Warm up the connections and the statement cache.
	for i := range int64(clients) {
		if _, err := put(i); err != nil {
			b.Fatal(err)
		}
	}
	before := h.st.Stats()
	lats := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	for c := range clients {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				d, err := put(i)
				if err != nil {
					b.Error(err)
					return
				}
				lats[c] = append(lats[c], d)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	st := h.st.Stats()
	all := slices.Concat(lats...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	pct := func(p float64) float64 {
		i := min(max(int(p*float64(len(all))+0.5)-1, 0), len(all)-1)
		return float64(all[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "writes/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	if txns := st.Transactions - before.Transactions; txns > 0 {
		b.ReportMetric(float64(st.Writes-before.Writes)/float64(txns), "writes/txn")
	}
}
