package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowplane/flowplane/internal/wire"
)

// consoleProbe counts the console's requests by path and keeps every
// uncaught error and unhandled rejection, for the health checks of a page.
// It wraps fetch after the console started: the console looks fetch up on
// every call, so each later request is counted.
const consoleProbe = `(() => {
	if (window.__probe) return;
	const p = window.__probe = {errors: [], req: {}};
	addEventListener("error", (e) => p.errors.push(String(e.message || e.error)));
	addEventListener("unhandledrejection", (e) => p.errors.push("unhandled rejection: " + String(e.reason)));
	const f = window.fetch;
	window.fetch = function (input, init) {
		const u = new URL(typeof input === "string" ? input : input.url, location.href);
		p.req[u.pathname] = (p.req[u.pathname] || 0) + 1;
		return f.apply(this, arguments);
	};
})()`

// signInProbed signs in with the operator token, waits for the fleet
// overview, then installs consoleProbe and marks the document (a reload
// would lose both).
func (b *browser) signInProbed() {
	b.t.Helper()
	b.open("", "login")
	b.run("sign in", chromedp.SendKeys(chromedp.CSS("#token"), fleetOperatorToken), chromedp.Click(chromedp.CSS(`form[data-form=login] button[type=submit]`)))
	b.waitJS("the fleet overview", `document.querySelector('main[data-page=fleet]')`)
	b.run("probe", js(consoleProbe))
	b.markDocument()
}

// noErrors fails unless the console threw nothing since the probe.
func (b *browser) noErrors(what string) {
	b.t.Helper()
	if errs, err := eval[[]string](b, `window.__probe.errors`); err != nil || len(errs) > 0 {
		b.t.Fatalf("%s: uncaught errors in the console: %q (%v)", what, errs, err)
	}
}

// probeCounts reads the probe's request counts by path.
func probeCounts(b *browser) map[string]int {
	b.t.Helper()
	m, err := eval[map[string]int](b, `window.__probe.req`)
	if err != nil {
		b.t.Fatalf("read the request probe: %v", err)
	}
	return m
}

// checkPageHealthy fails unless the page threw nothing, shows one page (one
// page header, titled with want), and its requests stay bounded: over a 2 s
// window, at most 3 requests for any job's plan and 80 in all (a page
// re-fetches at most every 500 ms per resource on live events).
func checkPageHealthy(b *browser, what, want string) {
	b.t.Helper()
	b.noErrors(what)
	heads, err := eval[[]string](b, `[...document.querySelectorAll("main .page-header h1")].map(e => e.innerText)`)
	if err != nil || len(heads) != 1 || !strings.Contains(heads[0], want) {
		b.t.Fatalf("%s: page headers %q (%v), want one with %q", what, heads, err, want)
	}
	before := probeCounts(b)
	time.Sleep(2 * time.Second)
	after := probeCounts(b)
	total, plans := 0, 0
	for path, n := range after {
		d := n - before[path]
		total += d
		if strings.HasSuffix(path, "/plan") {
			plans += d
		}
	}
	if plans > 3 || total > 80 {
		b.t.Fatalf("%s: %d plan requests and %d in all in 2 s: %v -> %v", what, plans, total, before, after)
	}
	if loading, err := eval[int](b, `document.querySelectorAll("main [data-state=loading]").length`); err != nil || loading > 0 {
		b.t.Fatalf("%s: %d sections still loading (%v)\npage text: %s", what, loading, err, b.text())
	}
}

// TestHubConsoleJobFlow follows the README's job flow with the job's page
// open in Chromium, without a reload: created, started, stopped with a
// savepoint (clicked in the console), upgraded to version 2, started,
// moved after its node's SIGKILL, run to the end of its input (a watermark
// at the end of time). After each step the page threw nothing, shows one
// job, has loaded every section and keeps its request rate bounded; the
// next job's page replaces it.
func TestHubConsoleJobFlow(t *testing.T) {
	t.Parallel() // independent: own ports, own directories, own processes
	if testing.Short() {
		t.Skip("starts a Hub, two Agents and Chromium")
	}
	chromiumPath(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out", "counts.jsonl")
	s3 := slowS3(t, 0)
	h := startFleetHub(t, dir)
	a := newJobNode(t, dir, "node-a", h.url())
	nb := newJobNode(t, dir, "node-b", h.url())
	a.env, nb.env = s3.env, s3.env
	a.start(t)
	nb.start(t)
	h.waitStatus(t, "node-a", "online")
	h.waitStatus(t, "node-b", "online")

	b := newBrowser(t, h.url())
	b.signInProbed()

	h.call(t, "POST", "/jobs", `{"spec": `+hubJobSpec(1, out, s3.uri)+`, "desired_state": "running", "node_ids": ["node-a"]}`, http.StatusAccepted, nil)
	b.goTo("#/jobs/user-counts", "job")
	h.waitJob(t, "user-counts", "running", func(j wire.Job) bool {
		return j.Convergence == wire.ConvergenceInSync && j.Observed.State == wire.JobRunning
	})
	b.waitJS("the DAG", `document.querySelectorAll('[data-dag] [data-operator]').length === 3`)
	b.waitJS("running", `document.querySelector('[data-convergence=in_sync]') && document.querySelector('main').innerText.includes("running")`)
	checkPageHealthy(b, "running", "user-counts")

	b.confirm("Stop with savepoint")
	b.waitJS("the operation", `document.querySelector('[data-result=operation]')`)
	h.waitJob(t, "user-counts", "stopped with a savepoint", func(j wire.Job) bool {
		return j.Convergence == wire.ConvergenceInSync && j.Desired.State == "stopped" && j.Observed.State == wire.JobStopped
	})
	b.waitJS("a savepoint listed", `document.querySelector('table[data-table=savepoints] td[data-col=trigger]')`)
	checkPageHealthy(b, "stopped with a savepoint", "user-counts")

	var up wire.JobDesiredResponse
	h.call(t, "POST", "/jobs/user-counts/upgrades", `{"spec": `+hubJobSpec(2, out, s3.uri)+`, "mode": "savepoint", "strict": true}`, http.StatusAccepted, &up)
	b.waitJS("version 2's DAG", `document.querySelectorAll('[data-dag] [data-operator]').length === 4`)
	b.click("Start")
	b.run("confirm Start", chromedp.Click(chromedp.CSS(`dialog[open] [data-confirm-ok]`)))
	h.waitJob(t, "user-counts", "version 2 running", func(j wire.Job) bool {
		return j.Desired.Generation > up.Generation && j.Observed.Version == 2 && j.Observed.State == wire.JobRunning
	})
	b.waitJS("the job's records chart", `document.querySelector('figure[data-chart="Records per second, job user-counts"] svg polyline')`)
	checkPageHealthy(b, "version 2 running", "user-counts")

	a.kill(t)
	h.waitJob(t, "user-counts", "degraded", func(j wire.Job) bool { return j.ConvergenceReason == "node_lost" })
	var moved wire.JobDesiredResponse
	h.call(t, "POST", "/jobs/user-counts/actions/move", "", http.StatusAccepted, &moved)
	h.waitJob(t, "user-counts", "completed on node-b", func(j wire.Job) bool {
		return j.NodeID == "node-b" && j.Observed.State == wire.JobCompleted
	})
	b.waitJS("completed on node-b", `document.querySelector('main [data-field=state]') && [...document.querySelectorAll('table[data-table=job-tasks] td[data-col=node]')].every(e => e.innerText === "node-b")`)
	b.waitJS("the end of input", `document.querySelector('table[data-table=job-tasks] td[data-col=watermark]').innerText.includes("end of input")`)
	checkPageHealthy(b, "moved and completed", "user-counts")
	// Checkpoints past checkpoint.retention (3) are pruned, not completed.
	b.waitJS("pruned checkpoints", `document.querySelector('table[data-table=checkpoints] [data-value=pruned]') && document.querySelectorAll('table[data-table=checkpoints] td[data-col=state] [data-value=completed]').length <= 3`)
	b.screenshot("job-completed")

	// Another job's page replaces this one.
	other := strings.Replace(hubJobSpec(1, filepath.Join(dir, "out2", "c.jsonl"), s3.uri), `"user-counts"`, `"other-counts"`, 1)
	h.call(t, "POST", "/jobs", `{"spec": `+other+`, "desired_state": "stopped", "node_ids": ["node-b"]}`, http.StatusAccepted, nil)
	b.goTo("#/jobs", "jobs")
	b.waitJS("two jobs", `document.querySelectorAll('table[data-table=jobs] tbody tr').length === 2`)
	b.goTo("#/jobs/other-counts", "job")
	b.waitJS("the other job's DAG", `document.querySelectorAll('[data-dag] [data-operator]').length === 3`)
	checkPageHealthy(b, "the next job", "other-counts")

	// The fleet counts the jobs; a node's page lists its jobs.
	b.goTo("#/fleet", "fleet")
	b.waitJS("two jobs on the fleet overview", `document.querySelector('[data-tile=Jobs] .big').innerText === "2" && document.querySelector('[data-bar="/jobs"]')`)
	b.goTo("#/nodes/node-b", "node")
	b.waitJS("node-b's jobs", `[...document.querySelectorAll('table[data-table=node-jobs] tbody tr')].map(e => e.dataset.key).sort().join() === "other-counts,user-counts"`)
	b.checkNotReloaded("the job flow")
}
