package main

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestHubConsoleManage drives, in Chromium, what an operator does about
// desired state nobody can run and about a stream's and a node's state:
// a stream a node reports that nobody manages reads "not managed"; Start
// is disabled on a stream desired running; "Stop managing" deletes a
// stream's desired state (the node's report stays, not managed); "Forget
// node" removes a node known only from a typo'd desired-state write; Drain
// is disabled while draining and "Undrain" ends it. Every step without an
// uncaught error or a reload.
func TestHubConsoleManage(t *testing.T) {
	t.Parallel() // independent: own ports, own directories, own processes
	if testing.Short() {
		t.Skip("starts a Hub, an Agent and Chromium")
	}
	chromiumPath(t)
	dir := t.TempDir()
	h := startFleetHub(t, dir)
	n := newFleetNode(t, dir, "node-a", []string{h.url()}, "")
	n.start(t)
	h.waitStatus(t, "node-a", "online")
	w := h.put(t, "node-a", "desired", "running")
	h.waitInSync(t, "node-a", "desired", w.Generation)
	h.put(t, "node-typo", "orders", "running")
	h.put(t, "node-typo", "payments", "stopped")

	b := newBrowser(t, h.url())
	b.signInProbed()
	noErrors := b.noErrors

	// The fleet's stream card counts what its convergence bar counts (the
	// typo'd node's two desired streams included).
	b.waitJS("the stream card agrees with the bar", `(() => {
		const bar = document.querySelector('[data-bar="/streams"]');
		if (!bar) return false;
		const sum = [...bar.parentElement.querySelectorAll('[data-convergence-count]')].reduce((a, e) => a + Number(e.dataset.n), 0);
		return sum > 0 && Number(document.querySelector('[data-tile=Streams] .big').innerText.replace(/,/g, "")) === sum;
	})()`)
	b.goTo("#/streams?node_id=node-a", "streams")
	b.waitJS("not managed", `[...document.querySelectorAll('table[data-table=streams] [data-managed=false]')].some(e => e.innerText === "not managed")`)

	b.goTo("#/nodes/node-a/streams/desired", "stream")
	b.waitJS("in_sync", `document.querySelector('[data-convergence=in_sync]')`)
	button := func(label string) string {
		return `[...document.querySelectorAll("main button")].find(e => e.innerText.trim() === "` + label + `")`
	}
	b.waitJS("Start disabled, Stop enabled on a running stream", button("Start")+`.disabled && !`+button("Stop")+`.disabled`)
	b.confirm("Stop managing")
	b.waitJS("not managed", `document.querySelector('[data-result=unmanaged]') && document.querySelector('[data-side=convergence] [data-managed=false]')`)
	if s := h.stream(t, "node-a", "desired"); s.Desired.Generation != 0 || s.Convergence != wire.ConvergenceUnknown || s.Observed.State == "" {
		t.Fatalf("after Stop managing the Hub shows %+v", s)
	}
	b.waitJS("Stop managing disabled", button("Stop managing")+`.disabled`)
	noErrors("stop managing")

	b.goTo("#/nodes/node-typo", "node")
	b.waitJS("the phantom node's streams", `document.querySelectorAll('table[data-table=node-streams] tbody tr').length === 2`)
	b.confirm("Forget node")
	b.waitJS("the nodes list", `document.querySelector('main[data-page=nodes]')`)
	b.waitJS("only node-a", `[...document.querySelectorAll('table[data-table=nodes] tbody tr')].map(e => e.dataset.key).join() === "node-a"`)
	if status, _ := h.try("GET", "/nodes/node-typo", "", nil); status != http.StatusNotFound {
		t.Fatalf("the forgotten phantom node: %d", status)
	}
	var ops wire.Page[wire.Operation]
	h.call(t, "GET", "/operations?node_id=node-typo&state=pending", "", http.StatusOK, &ops)
	if ops.Total != 0 {
		t.Fatalf("the phantom node's operations stay pending: %+v", ops.Items)
	}
	noErrors("forget node")

	b.goTo("#/nodes/node-a", "node")
	b.waitJS("active", `document.querySelector('[data-mode=active]')`)
	b.confirm("Drain")
	b.waitJS("draining", `document.querySelector('[data-mode=draining]')`)
	b.waitJS("Drain disabled while draining", button("Drain")+`.disabled`)
	b.confirm("Undrain")
	b.waitJS("active again", `document.querySelector('[data-mode=active]')`)
	if v, _ := h.nodeView("node-a"); v.Mode != wire.NodeModeActive {
		t.Fatalf("node-a mode %q after Undrain", v.Mode)
	}
	noErrors("drain and undrain")

	// The charts open filled from the Hub's history (a sample every 10 s;
	// the Hub has run long enough for two by now, or soon will).
	for _, p := range []struct{ route, page, chart string }{
		{"#/fleet", "fleet", "Messages per second, whole fleet"},
		{"#/nodes/node-a", "node", "Messages per second, node node-a"},
		{"#/nodes/node-a/streams/desired", "stream", "Messages per second, desired on node-a"},
	} {
		b.goTo(p.route, p.page)
		b.waitJS("the chart filled", fmt.Sprintf(`document.querySelector('figure[data-chart=%q] svg polyline')`, p.chart))
	}
	noErrors("charts")

	// A rollout of a configuration with a typo'd processor fails in its
	// preflight: node-a's problems on the rollout's page, no node changed.
	doc := "logging: {level: info}\nstreams:\n  - id: typo\n    input: {type: generate, context: '{\"n\": 1}', interval: 200ms}\n" +
		"    pipeline: {processors: [{type: jsno}]}\n    output: {type: drop}\n"
	var ro wire.Rollout
	h.call(t, "POST", "/rollouts", `{"configuration": `+jsonDoc(doc)+`, "node_ids": ["node-a"], "batch_size": 1, "gate_timeout_ms": 20000}`, http.StatusCreated, &ro)
	b.goTo("#/rollouts/"+ro.RolloutID, "rollout")
	b.waitJS("the preflight failure", `document.querySelector('[data-rollout-failure=preflight_failed]') && document.querySelector('[data-preflight=node-a]')`)
	if st, _ := eval[string](b, `document.querySelector('[data-preflight=node-a]').dataset.state`); st != wire.PreflightInvalid && st != wire.PreflightFailed {
		t.Fatalf("node-a's preflight on the page: %q", st)
	}
	if got := h.rollout(t, ro.RolloutID); got.CurrentWave != 0 || got.Nodes[0].OperationID != "" {
		t.Fatalf("a rollout refused in preflight changed a node: %+v", got)
	}
	noErrors("preflight")

	// An action clicked while the Hub is down is not dropped: it runs once
	// the Hub is back.
	b.goTo("#/nodes/node-a/streams/desired", "stream")
	b.waitJS("not managed", `document.querySelector('[data-side=convergence] [data-managed=false]')`)
	h.kill(t)
	b.confirm("Start")
	b.waitJS("the retry announced", `[...document.querySelectorAll('[data-notice=warn]')].some(e => e.innerText.includes("runs again once the Hub is back"))`)
	h.start(t)
	// Accepted, or already converged: the settled notice replaces the
	// accepted one as soon as the stream is in_sync.
	b.waitJS("the action carried out", `document.querySelector('[data-notice=ok] [data-accepted], [data-notice=ok] [data-converged]')`)
	if s := h.stream(t, "node-a", "desired"); s.Desired.State != "running" {
		t.Fatalf("the retried Start: %+v", s.Desired)
	}
	b.waitJS("the banner gone", `!document.querySelector('[data-state=reconnecting]')`)
	noErrors("retry")
	b.checkNotReloaded("managing")

	// A mistyped console URL answers the console's 404 page, not JSON.
	b.run("open /ui/unknown", chromedp.Navigate(b.base+"/ui/unknown"))
	b.waitJS("the console's 404 page", `document.querySelector('main[data-page=not-found] [data-state=not-found]') && document.body.innerText.includes("/ui/unknown")`)
}
