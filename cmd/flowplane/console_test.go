package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowplane/flowplane/internal/wire"
)

// The console test drives the Hub's web console in Debian's Chromium
// (headless, through chromedp) against a real Hub and two real Agents, all
// child processes, and checks what a person sees against what the operator
// API says. With $FLOWPLANE_SCREENSHOTS set, screenshots of every page at
// 1400 and 800 px go there.

// chromiumPath finds Chromium: $CHROMIUM, then the usual names.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("Chromium is not installed (apt-get install chromium); .ci/run installs it")
	return ""
}

// browser is one headless Chromium tab, with the test's deadline on every step.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string // the Hub's URL
	shot string // screenshot directory; "" takes none
}

// screenshotsEnv names the directory the console tests save screenshots
// of every page to (docs/console: see docs/console.md); unset, they take
// none.
const screenshotsEnv = "FLOWPLANE_SCREENSHOTS"

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	dir := os.Getenv(screenshotsEnv)
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Logf("console screenshots in %s", dir)
	}
	return &browser{t: t, ctx: ctx, base: base, shot: dir}
}

// run runs chromedp actions with a 30 s limit.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v\npage text: %s", what, err, b.text())
	}
}

// text is the page's visible text, for failure messages.
func (b *browser) text() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	return s
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// js runs a JavaScript statement for its effect.
func js(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[any](expr)(ctx, t)
		return err
	})
}

// waitJS waits until the JavaScript expression is true.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ok, err := eval[bool](b, "Boolean("+expr+")"); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out waiting for %s (%s)\npage text: %s", what, expr, b.text())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// open goes to a console route ("#/streams") and waits for its page.
func (b *browser) open(route, page string) {
	b.t.Helper()
	b.run("open "+route, chromedp.Navigate(b.base+"/ui/"+route))
	b.waitJS("page "+page, fmt.Sprintf(`document.querySelector('main[data-page=%q]')`, page))
}

// goTo changes the route without reloading the document (a click on a link).
func (b *browser) goTo(route, page string) {
	b.t.Helper()
	b.run("go to "+route, js(fmt.Sprintf(`location.hash = %q`, strings.TrimPrefix(route, "#"))))
	b.waitJS("page "+page, fmt.Sprintf(`document.querySelector('main[data-page=%q]')`, page))
}

// click clicks (with the mouse, through CDP) the visible button inside
// main whose text is label.
func (b *browser) click(label string) {
	b.t.Helper()
	b.waitJS("a "+label+" button", fmt.Sprintf(`(() => {
		const el = [...document.querySelectorAll("main button")].find(e => e.innerText.trim() === %q && e.offsetParent !== null && !e.disabled);
		document.querySelectorAll("[data-test-target]").forEach(e => e.removeAttribute("data-test-target"));
		if (el) el.setAttribute("data-test-target", "");
		return !!el;
	})()`, label))
	b.run("click "+label, chromedp.Click(chromedp.CSS(`[data-test-target]`)))
}

// confirm clicks label, then the open dialog's confirmation.
func (b *browser) confirm(label string) {
	b.t.Helper()
	b.click(label)
	b.run("confirm "+label, chromedp.Click(chromedp.CSS(`dialog[open] [data-confirm-ok]`)))
}

// screenshotWidths are the widths of the console's screenshots: a
// desktop window and a narrow one. Each is cropped to the viewport height.
var screenshotWidths = []int64{1400, 800}

const screenshotHeight = 900

// screenshot saves the page as name-<width>.png at every width of
// screenshotWidths, cropped to the top screenshotHeight pixels, into
// $FLOWPLANE_SCREENSHOTS; without it (CI), nothing is taken.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	b.screenshotAt(name, "")
}

// screenshotAt is screenshot with the element of the CSS selector at the
// top of the viewport ("": the page's top).
func (b *browser) screenshotAt(name, selector string) {
	b.t.Helper()
	if b.shot == "" {
		return
	}
	// Let charts and live data settle.
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	for _, w := range screenshotWidths {
		png, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
			if _, err := chromedp.EmulateViewport(w, screenshotHeight)(ctx, t); err != nil {
				return nil, err
			}
			scroll := `window.scrollTo(0, 0)`
			if selector != "" {
				scroll = fmt.Sprintf(`document.querySelector(%q).scrollIntoView({block: "start"})`, selector)
			}
			if _, err := chromedp.Evaluate[any](scroll)(ctx, t); err != nil {
				return nil, err
			}
			// One relayout at the new width.
			if _, err := chromedp.Evaluate[any](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))`, chromedp.EvalAwaitPromise)(ctx, t); err != nil {
				return nil, err
			}
			return chromedp.CaptureScreenshot()(ctx, t)
		})
		if err != nil {
			b.t.Fatalf("screenshot %s at %d px: %v", name, w, err)
		}
		if err := os.WriteFile(filepath.Join(b.shot, fmt.Sprintf("%s-%d.png", name, w)), compressPNG(b.t, png), 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	b.run("window size back", chromedp.EmulateViewport(1400, 1000))
}

// compressPNG re-encodes a PNG at the best compression, and with a palette
// when it has at most 256 colours (a console page mostly has), which keeps
// the files in docs/console small.
func compressPNG(t *testing.T, b []byte) []byte {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode screenshot: %v", err)
	}
	bounds := img.Bounds()
	var pal color.Palette
	index := map[color.Color]uint8{}
	paletted := image.NewPaletted(bounds, nil)
	ok := true
	for y := bounds.Min.Y; y < bounds.Max.Y && ok; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y))
			i, seen := index[c]
			if !seen {
				if len(pal) == 256 {
					ok = false
					break
				}
				i = uint8(len(pal))
				index[c] = i
				pal = append(pal, c)
			}
			paletted.Pix[paletted.PixOffset(x, y)] = i
		}
	}
	var out bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	src := img
	if ok {
		paletted.Palette = pal
		src = paletted
	}
	if err := enc.Encode(&out, src); err != nil {
		t.Fatalf("encode screenshot: %v", err)
	}
	if out.Len() > len(b) {
		return b
	}
	return out.Bytes()
}

// markDocument sets a mark on window that a reload would erase.
func (b *browser) markDocument() {
	b.t.Helper()
	b.run("mark", js(`window.__noReload = 1`))
}

func (b *browser) checkNotReloaded(what string) {
	b.t.Helper()
	if v, err := eval[int](b, `window.__noReload || 0`); err != nil || v != 1 {
		b.t.Fatalf("%s: the page was reloaded", what)
	}
}

// TestConsole is the console's end-to-end test: sign-in with a wrong and a
// right token, the fleet overview, a stream stopped from its page and
// watched through applying to in_sync without a reload, a node drained, a
// pending operation for an offline node cancelled, a 412 shown as "changed
// by someone else", and a screenshot of every page.
func TestConsole(t *testing.T) {
	t.Parallel() // independent: own ports, own directories, own processes
	if testing.Short() {
		t.Skip("starts a Hub, two Agents and Chromium")
	}
	chromiumPath(t)
	dir := t.TempDir()
	h := startFleetHub(t, dir)
	nodes := map[string]*fleetNode{}
	for _, id := range []string{"node-a", "node-b"} {
		n := newFleetNode(t, dir, id, []string{h.url()}, "")
		n.start(t)
		nodes[id] = n
	}
	for id := range nodes {
		h.waitStatus(t, id, "online")
	}
	// The stream the test stops, running and in sync first.
	w := h.put(t, "node-a", "desired", "running")
	h.waitInSync(t, "node-a", "desired", w.Generation)

	b := newBrowser(t, h.url())

	t.Run("wrong token", func(t *testing.T) {
		b.t = t
		b.open("", "login")
		b.screenshot("login")
		b.run("sign in", chromedp.SendKeys(chromedp.CSS("#token"), "not-the-operator-token"), chromedp.Click(chromedp.CSS(`form[data-form=login] button[type=submit]`)))
		b.waitJS("the refusal", `document.querySelector('[data-state=login-error]')`)
		msg, _ := eval[string](b, `document.querySelector('[data-state=login-error]').innerText`)
		if !strings.Contains(msg, "did not accept") || !strings.Contains(msg, "401") {
			t.Fatalf("wrong token message %q", msg)
		}
		b.screenshot("login-wrong-token")
	})

	t.Run("sign in and see the fleet", func(t *testing.T) {
		b.t = t
		b.run("clear the token", js(`document.querySelector("#token").value = ""`))
		b.run("type token", chromedp.SendKeys(chromedp.CSS("#token"), fleetOperatorToken), chromedp.Click(chromedp.CSS(`form[data-form=login] button[type=submit]`)))
		b.waitJS("the fleet overview", `document.querySelector('main[data-page=fleet]')`)
		b.waitJS("two nodes online", `(document.querySelector('[data-count=online] strong')||{}).innerText === "2"`)
		b.waitJS("the streams total", `document.querySelector('[data-tile=Streams] .big').innerText === "22"`)
		b.waitJS("the live stream", `document.querySelector('[data-live=live]')`)
		// One Hub on SQLite leads, at the epoch of its start.
		b.waitJS("the Hub's HA role", `(document.querySelector('[data-ha-role=leader]')||{}).innerText === "Hub leader" && Number(document.querySelector('[data-ha-role]').dataset.haEpoch) >= 1`)
		token, _ := eval[string](b, `sessionStorage.getItem("flowplane.operator_token")`)
		url, _ := eval[string](b, `location.href`)
		if token != fleetOperatorToken || strings.Contains(url, fleetOperatorToken) {
			t.Fatalf("token kept %q, URL %q: want it in sessionStorage only", token, url)
		}
		b.screenshot("fleet")
	})

	t.Run("live tail", func(t *testing.T) {
		b.t = t
		b.goTo("#/nodes/node-a/streams/desired", "stream")
		b.waitJS("in_sync", `document.querySelector('[data-convergence=in_sync]')`)
		b.run("start the tail", chromedp.Click(chromedp.CSS(`button[data-tail=start]`)))
		b.waitJS("tapped messages", `document.querySelectorAll('[data-tail=row]').length >= 2`)
		row, _ := eval[string](b, `document.querySelector('[data-tail=row]').innerText`)
		if !strings.Contains(row, `"n":`) || !strings.Contains(row, "processor") && !strings.Contains(row, "input") {
			t.Fatalf("tail row %q: want a sampled message of the stream", row)
		}
		b.screenshot("stream-tail")
		b.run("stop the tail", chromedp.Click(chromedp.CSS(`button[data-tail=stop]`)))
		b.waitJS("stopped", `document.querySelector('button[data-tail=start]')`)
	})

	t.Run("stop a stream and watch it converge", func(t *testing.T) {
		b.t = t
		b.goTo("#/nodes/node-a/streams/desired", "stream")
		b.waitJS("in_sync", `document.querySelector('[data-convergence=in_sync]')`)
		b.markDocument()
		// Frozen, the Agent takes the command on its open long poll but
		// cannot report: the Hub shows the write dispatched (applying)
		// until it runs again.
		thaw := nodes["node-a"].freeze(t)
		b.confirm("Stop")
		b.waitJS("applying", `document.querySelector('[data-convergence=applying]')`)
		b.screenshot("stream-applying")
		thaw()
		b.waitJS("in_sync again", `document.querySelector('[data-convergence=in_sync]')`)
		// The write's notice ends with its condition: no "Convergence
		// pending" once the stream is in_sync at the write's generation.
		b.waitJS("the converged notice", `document.querySelector('[data-notice] [data-converged]') && !document.querySelector('main').innerText.includes("Convergence pending")`)
		b.checkNotReloaded("convergence")
		s := h.stream(t, "node-a", "desired")
		if s.Desired.State != "stopped" || s.Observed.State != "stopped" || s.Convergence != wire.ConvergenceInSync {
			t.Fatalf("after Stop in the console the Hub shows %+v", s)
		}
		b.screenshot("stream")
	})

	t.Run("a 412 is shown as changed by someone else", func(t *testing.T) {
		b.t = t
		b.goTo("#/nodes/node-a/streams/restart", "stream")
		b.waitJS("the stream's view", `document.querySelector('[data-convergence]')`)
		// With live updates paused the page keeps its generation while
		// another operator writes.
		b.run("pause live", chromedp.Click(chromedp.CSS(`[data-live-toggle]`)))
		b.waitJS("paused", `document.querySelector('[data-live=paused]')`)
		other := h.put(t, "node-a", "restart", "running")
		b.confirm("Stop")
		b.waitJS("the conflict", `[...document.querySelectorAll('[data-notice]')].some(e => e.innerText.includes("Changed by someone else"))`)
		b.screenshot("stream-412")
		if s := h.stream(t, "node-a", "restart"); s.Desired.Generation != other.Generation || s.Desired.State != "running" {
			t.Fatalf("the stale write changed the stream: %+v", s.Desired)
		}
		b.click("Reload")
		b.run("resume live", chromedp.Click(chromedp.CSS(`[data-live-toggle]`)))
		b.waitJS("live again", `document.querySelector('[data-live=live]')`)
	})

	t.Run("drain a node", func(t *testing.T) {
		b.t = t
		b.goTo("#/nodes/node-b", "node")
		b.waitJS("active", `document.querySelector('[data-mode=active]')`)
		b.confirm("Drain")
		b.waitJS("draining", `document.querySelector('[data-mode=draining]')`)
		if v, _ := h.nodeView("node-b"); v.Mode != "draining" {
			t.Fatalf("node-b mode %q at the Hub, want draining", v.Mode)
		}
		b.screenshot("node")
	})

	t.Run("cancel a pending operation for an offline node", func(t *testing.T) {
		b.t = t
		// A node that is not connected: the intent waits, pending.
		w := h.put(t, "node-offline", "orders", "running")
		b.goTo("#/operations?state=pending", "operations")
		row := fmt.Sprintf(`tr[data-key=%q]`, w.OperationID)
		b.waitJS("the pending operation listed", `document.querySelector('`+row+`')`)
		b.screenshot("operations")
		b.run("open it", chromedp.Click(chromedp.CSS(row+` td[data-col=operation] a`)))
		b.waitJS("its page", `document.querySelector('main[data-page=operation] [data-operation-state=pending]')`)
		b.confirm("Cancel operation")
		b.waitJS("cancelled", `document.querySelector('[data-operation-state=cancelled]')`)
		if op := h.operation(t, w.OperationID); op.State != "cancelled" {
			t.Fatalf("operation %s is %q at the Hub, want cancelled", w.OperationID, op.State)
		}
		b.screenshot("operation")
		// The phantom node's Facts card counts the streams its table lists.
		b.goTo("#/nodes/node-offline", "node")
		b.waitJS("its streams table", `document.querySelector('table[data-table=node-streams] tbody tr')`)
		facts, _ := eval[string](b, `document.querySelector('dd[data-field=streams]').innerText`)
		rows, _ := eval[int](b, `document.querySelectorAll('table[data-table=node-streams] tbody tr').length`)
		if facts != "1" || rows != 1 {
			t.Fatalf("phantom node: Facts streams %q, table rows %d; want 1 and 1", facts, rows)
		}
		b.screenshot("node-phantom")
	})

	t.Run("every page", func(t *testing.T) {
		b.t = t
		// A job, created stopped: its page draws the plan's DAG and lists
		// its tasks as not observed yet.
		spec := hubJobSpec(1, filepath.Join(dir, "counts.jsonl"), "file://"+filepath.Join(dir, "checkpoints"))
		h.call(t, "POST", "/jobs", `{"spec": `+spec+`, "desired_state": "stopped", "node_ids": ["node-a"]}`, http.StatusAccepted, nil)
		b.goTo("#/jobs/user-counts", "job")
		b.waitJS("the DAG", `document.querySelectorAll('[data-dag] [data-operator]').length === 3 && document.querySelector('[data-dag] .partitioned')`)
		b.waitJS("the tasks, not observed", `document.querySelector('table[data-table=job-tasks] [data-observed=false]')`)
		b.screenshot("job")
		for _, p := range []struct{ route, page, name string }{
			{"#/nodes", "nodes", "nodes"},
			{"#/streams", "streams", "streams"},
			{"#/jobs", "jobs", "jobs"},
			{"#/events", "events", "events"},
			{"#/audit", "audit", "audit"},
			{"#/rollouts", "rollouts", "rollouts"},
			{"#/configuration", "configuration", "configuration"},
			{"#/configuration/node-a", "node-configuration", "node-configuration"},
		} {
			b.goTo(p.route, p.page)
			b.waitJS(p.page+" loaded", `!document.querySelector('main [data-state=loading]')`)
			b.screenshot(p.name)
		}
		// The dark theme: the switch goes system -> light -> dark.
		b.goTo("#/fleet", "fleet")
		for range 2 {
			b.run("theme", chromedp.Click(chromedp.Search(`//header//button[contains(., "system") or contains(., "light")]`)))
		}
		b.waitJS("dark", `document.documentElement.dataset.theme === "dark"`)
		b.screenshot("fleet-dark")
	})

	t.Run("the Hub restarts and the console reconnects", func(t *testing.T) {
		b.t = t
		b.goTo("#/fleet", "fleet")
		b.markDocument()
		h.kill(t)
		b.waitJS("reconnecting", `document.querySelector('[data-live=reconnecting]')`)
		h.start(t)
		b.waitJS("live again", `document.querySelector('[data-live=live]')`)
		b.checkNotReloaded("Hub restart")
		// A write after the restart reaches the page over the new stream.
		w := h.put(t, "node-a", "desired", "running")
		b.goTo("#/nodes/node-a/streams/desired", "stream")
		h.waitInSync(t, "node-a", "desired", w.Generation)
		b.waitJS("in_sync at the new generation", `document.querySelector('[data-convergence=in_sync]') && document.body.innerText.includes("running")`)
	})

	t.Run("one configuration numbering", func(t *testing.T) {
		b.t = t
		// One content rolled out to both nodes: one version, shown alike on
		// the rollout's page and on each node's page.
		sink := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		defer sink.Close()
		doc := fleetDoc("base="+generateInput) + fmt.Sprintf(`  - id: billing
    input: {type: generate, context: '{"n": 1}', interval: 1s}
    pipeline: {processors: []}
    output: {type: http, url: %q, headers: {Authorization: "Bearer s3cret-literal"}}
`, sink.URL)
		// node-b was drained above: active again, it validates and applies.
		h.call(t, "DELETE", "/nodes/node-b/maintenance", "", http.StatusOK, nil)
		var r wire.Rollout
		h.call(t, "POST", "/rollouts", `{"configuration": `+jsonDoc(doc)+`, "node_ids": ["node-a", "node-b"], "batch_size": 2, "gate_timeout_ms": 30000}`, http.StatusCreated, &r)
		r = h.waitRollout(t, r.RolloutID, wire.RolloutSucceeded, 60*time.Second)
		want := r.Nodes[0].VersionTarget
		for _, n := range r.Nodes {
			if n.VersionTarget != want || n.VersionBefore == "" {
				t.Fatalf("rollout node %+v: want target %s like the others and a version before", n, want)
			}
		}
		b.goTo("#/rollouts/"+r.RolloutID, "rollout")
		for _, id := range []string{"node-a", "node-b"} {
			b.waitJS(id+"'s target", fmt.Sprintf(`(document.querySelector('[data-versions=%q] [data-version-target]')||{}).innerText === %q`, id, want))
		}
		b.screenshot("rollout")
		for _, id := range []string{"node-a", "node-b"} {
			b.goTo("#/nodes/"+id, "node")
			b.waitJS(id+" runs "+want, fmt.Sprintf(`(document.querySelector('dd[data-field=configuration] [data-config-version]')||{}).innerText === %q`, want))
		}
		// The stream's page shows its definition, the literal password masked.
		b.goTo("#/nodes/node-a/streams/billing", "stream")
		b.waitJS("the stream's configuration", `(document.querySelector('[data-field=stream-configuration]')||{}).innerText?.includes("billing")`)
		// The node reports the stream running the Hub's version too.
		b.waitJS("the observed config version "+want, fmt.Sprintf(`(document.querySelector('[data-side=observed] dd[data-field="config version"]')||{}).innerText === %q`, want))
		if text, _ := eval[string](b, `document.querySelector('main').innerText`); strings.Contains(text, "s3cret-literal") {
			t.Fatal("the stream's page shows a literal password")
		}
		b.screenshotAt("stream-configuration", "section.card:has([data-field=stream-configuration])")
	})

}
