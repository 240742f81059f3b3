package node_test

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestValidationIsBounded: the body of 340,000 empty streams that made a
// 73 MB response and a gigabyte of memory answers a short report: the
// streams limit, then MaxProblems problems and a count of the rest; what
// the request allocates is a bounded multiple of the body. Apply answers
// the same capped problems.
func TestValidationIsBounded(t *testing.T) {
	h := newHarness(t, doc(hcLocal, genStream("a", "a")))
	content := `{"streams": [` + strings.Repeat(`{},`, 340000) + `{}]}`
	body := configBody(t, "json", content)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := h.expect(t, 200, "POST", "/configuration/validate", body)
	runtime.ReadMemStats(&after)
	if alloc, limit := after.TotalAlloc-before.TotalAlloc, uint64(len(body))*150; alloc > limit {
		t.Errorf("validating a %d kB body allocated %d MB; at most %d MB", len(body)>>10, alloc>>20, limit>>20)
	}
	if len(r.Body) > 64<<10 {
		t.Errorf("report of %d kB", len(r.Body)>>10)
	}
	rep := decode[struct {
		Valid  bool
		Errors []config.Problem
	}](t, r)
	if rep.Valid {
		t.Errorf("valid")
	}
	checkCapped(t, rep.Errors)

	p := problem(t, h.expect(t, 422, "POST", "/configuration/apply", body), "validation_failed")
	if p.Message != "the request is invalid: 3073 problems (the first 100 listed)" {
		t.Errorf("message %q", p.Message)
	}
	b, _ := json.Marshal(p.Details["errors"])
	var errs []config.Problem
	if err := json.Unmarshal(b, &errs); err != nil {
		t.Fatal(err)
	}
	checkCapped(t, errs)
	if st := h.stream(t, "a"); st.Observed.State != "running" {
		t.Errorf("stream a is %s", st.Observed.State)
	}
	if ops := decode[wire.Page[wire.Operation]](t, h.expect(t, 200, "GET", "/operations", "")); ops.Total != 0 {
		t.Errorf("an invalid apply made an operation: %+v", ops.Items)
	}
}

func checkCapped(t *testing.T, ps []config.Problem) {
	t.Helper()
	if len(ps) != config.MaxProblems+1 {
		t.Fatalf("%d problems listed, want %d", len(ps), config.MaxProblems+1)
	}
	if first := ps[0]; first.Path != "streams" || !strings.HasPrefix(first.Message, "340001 items; at most 1024 are allowed") {
		t.Errorf("first problem %+v", first)
	}
	// 1024 streams checked, 3 required fields missing in each.
	if last := ps[len(ps)-1]; last.Path != "" || last.Message != "and 2973 more problems" {
		t.Errorf("last problem %+v", last)
	}
}
