package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/engine"
)

// BenchmarkPipeline runs the bench/ pipeline (generate -> mapping -> filter
// -> drop) in-process with real components, b.N messages per run, so that
// `go test -bench Pipeline -cpuprofile` shows where the time goes.
func BenchmarkPipeline(b *testing.B) {
	for _, bs := range []int{1000, 1} {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("batch=%d/threads=%d", bs, threads), func(b *testing.B) {
				doc := fmt.Sprintf(`streams:
  - id: bench
    input: {type: generate, context: '{"id": {{count}}, "v": {{random}}}', interval: 0s, count: %d, batch_size: %d}
    pipeline:
      thread_num: %d
      processors:
        - type: mapping
          expression: 'merge(this, {"w": this.v * 2})'
        - type: filter
          condition: 'int(this.id) %% 2 == 0'
    output: {type: drop}
`, b.N, bs, threads)
				cfg := materialize(&testing.T{}, doc)
				e := engine.New(engine.Options{StateDir: b.TempDir()})
				changes, stop := e.Changes()
				defer stop()
				b.ResetTimer()
				start := time.Now()
				if err := e.Apply(context.Background(), cfg); err != nil {
					b.Fatal(err)
				}
				for !e.Finished() {
					<-changes
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
				if st := e.Streams()[0]; st.Errors != 0 || st.Sent != uint64(b.N/2) {
					b.Fatalf("pipeline did not run as meant: sent %d of %d, errors %d (%s)", st.Sent, b.N, st.Errors, st.LastError)
				}
				e.Shutdown(context.Background())
			})
		}
	}
}
