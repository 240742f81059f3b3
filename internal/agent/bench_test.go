package agent_test

import (
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// BenchmarkCommandToReport measures what the Hub's write-to-in_sync
// latency is made of on the Agent's side: from a command queued at the Hub
// to the report that shows it applied (state and generation), alternating
// stop and start of one stream. It reports p50 and p99.
func BenchmarkCommandToReport(b *testing.B) {
	hub := newTestHub(b, testNodeToken)
	startNode(b, nodeOptions{stateDir: b.TempDir(), hubURLs: []string{hub.URL}, streams: []string{"a"}})
	hub.waitStream(b, "a", "running", func(s wire.ReportStream) bool { return s.State == "running" })
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		state := "stopped"
		if i%2 == 1 {
			state = "running"
		}
		gen := int64(i + 1)
		start := time.Now()
		hub.enqueue(wire.Command{CommandID: "c" + strconv.Itoa(i), AttemptID: "a", Operation: wire.CommandStreamDesiredState, ResourceID: "a", Generation: gen, Payload: wire.CommandPayload{State: state}})
		hub.waitStream(b, "a", state, func(s wire.ReportStream) bool { return s.State == state && s.Generation == gen })
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")

}
