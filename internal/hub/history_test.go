package hub

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestHistory: the Hub samples what nodes report at every step and serves
// the per-second rates of the fleet, a node and a stream on their history
// routes, oldest first.
func TestHistory(t *testing.T) {
	th := serveOptions(t, true, Options{
		Settings: Settings{Address: "127.0.0.1:0", Storage: dbPath(t), NodeToken: nodeTokenFor("")},
		Logger:   slog.New(slog.DiscardHandler), Version: "test", HistoryStep: 50 * time.Millisecond,
	})
	a := newTestAgent(th, "n1")
	a.register(t, "", time.Minute, wire.CapabilityStreamControl)
	var sent uint64
	report := func() {
		a.seq++
		sent += 1000
		rep := wire.Report{BootID: a.bootID, ReportSeq: a.seq, ConfigurationVersion: "v1",
			Metrics: map[string]float64{"messages_received": float64(sent), "messages_sent": float64(sent), "stream_errors": 0},
			Streams: []wire.ReportStream{{ID: "s1", State: "running", Counters: &wire.StreamCounters{Received: sent, Sent: sent}}}}
		if r := a.call(t, "POST", "/report", rep, a.session); r.status != http.StatusNoContent {
			t.Fatalf("report: %d %s", r.status, r.body)
		}
	}
	for _, path := range []string{"/history", "/nodes/n1/history", "/nodes/n1/streams/s1/history"} {
		eventually(t, "rates on "+path, func() bool {
			report()
			time.Sleep(60 * time.Millisecond)
			h := operatorGet[History](t, th, path)
			if h.StepMS != 50 || h.RetentionMS != 50*360 || len(h.Series) != 3 || h.Series[1].Name != "sent" {
				t.Fatalf("%s: %+v", path, h)
			}
			pts := h.Series[1].Points
			for i := 1; i < len(pts); i++ {
				if pts[i][0] < pts[i-1][0] {
					t.Fatalf("%s: points out of order: %v", path, pts)
				}
			}
			return len(pts) >= 2 && pts[len(pts)-1][1] > 0 && len(h.Series[2].Points) == len(pts)
		})
	}
	h := operatorGet[History](t, th, "/jobs/none/history")
	if len(h.Series) != 2 || h.Series[0].Name != "records_in" || len(h.Series[0].Points) != 0 {
		t.Fatalf("an unknown job's history: %+v", h)
	}
}
