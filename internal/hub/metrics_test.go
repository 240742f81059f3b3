package hub

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/wire"
)

// Prometheus' patterns of metric and label names.
var (
	promMetricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	promLabelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// svcSeries counts the Hub's own series (svc_*) on the open registry, and
// checks every name against Prometheus' patterns and every label value of
// them against the values the Hub chooses.
func svcSeries(t *testing.T, h *Hub) int {
	t.Helper()
	mfs, err := h.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string][]string{
		"command": commandLabels, "outcome": outcomeLabels, "reason": {refusedRate, refusedMaxNodes},
		"status": {reconcile.StatusOnline, reconcile.StatusUnavailable},
	}
	n := 0
	for _, mf := range mfs {
		if !promMetricName.MatchString(mf.GetName()) {
			t.Errorf("metric name %q", mf.GetName())
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !promLabelName.MatchString(l.GetName()) {
					t.Errorf("%s: label name %q", mf.GetName(), l.GetName())
				}
				if vals, ok := allowed[l.GetName()]; strings.HasPrefix(mf.GetName(), "svc_") && (!ok || !slices.Contains(vals, l.GetValue())) {
					t.Errorf("%s: label %s=%q is not one the Hub chooses", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
			if strings.HasPrefix(mf.GetName(), "svc_") {
				n++
			}
		}
	}
	return n
}

// TestPublicMetricsCarryNoNodeValues: nodes that register and report
// metrics add no series and no label value to the open /metrics; the
// metrics they report are served behind the operator token, bounded by
// nodes × MaxReportMetrics.
func TestPublicMetricsCarryNoNodeValues(t *testing.T) {
	c := newAdmissionHub(t, Settings{RegisterRate: -1})
	before := svcSeries(t, c.h)
	const nodes = 40
	for i := range nodes {
		node := fmt.Sprintf("node-%02d.x_y", i)
		session := c.register(t, node)
		rep := wire.Report{BootID: "b", ReportSeq: 1, Metrics: map[string]float64{}, Streams: []wire.ReportStream{{ID: "s1", State: "running"}}}
		for m := range 64 {
			rep.Metrics[fmt.Sprint("m_", m)] = float64(m)
		}
		b, _ := jsonMarshal(rep)
		if rec := c.do(t, "POST", APIPrefix+"/agent/report", b, session); rec.Code != 204 {
			t.Fatalf("report: %d %s", rec.Code, rec.Body)
		}
	}
	if after := svcSeries(t, c.h); after != before {
		t.Fatalf("%d svc_ series with %d nodes, %d without", after, nodes, before)
	}
	body := c.do(t, "GET", "/metrics", "", "").Body.String()
	for _, s := range []string{"node_id", "node-0", "m_63", "svc_node_reported"} {
		if strings.Contains(body, s) {
			t.Fatalf("the open /metrics carries %q", s)
		}
	}
	op := c.do(t, "GET", APIPrefix+"/metrics", "", "").Body.String()
	if got := strings.Count(op, "\nsvc_node_reported{"); got != nodes*64 {
		t.Fatalf("%d svc_node_reported series behind the token, want %d", got, nodes*64)
	}
}

// TestPublicMetricsPromtool runs `promtool check metrics` on the open
// /metrics of a Hub with nodes.
func TestPublicMetricsPromtool(t *testing.T) {
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not on PATH (install the prometheus package to run this check)")
	}
	c := newAdmissionHub(t, Settings{RegisterRate: -1})
	c.register(t, "n1")
	for _, p := range []string{"/metrics", APIPrefix + "/metrics"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, path, "check", "metrics")
		cmd.Stdin = bytes.NewReader(c.do(t, "GET", p, "", "").Body.Bytes())
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("promtool check metrics %s: %v\n%s", p, err, strings.TrimSpace(string(out)))
		}
	}
}
