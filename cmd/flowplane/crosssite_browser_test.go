package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestCrossSiteBrowser: a page of another site, in Chromium, sends a form
// POST and a no-cors fetch POST (no Content-Type, so no media type stops
// it) to a token-less Node API and to a Hub in insecure-local mode (no
// operator token): neither runs. A page of an allowed origin then sends the
// same fetch, which runs: the browser delivers such requests, and only the
// cross-origin protection (Origin, Sec-Fetch-Site) refuses the others.
func TestCrossSiteBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node, a Hub and Chromium")
	}
	chromiumPath(t)
	dir := t.TempDir()

	// Pages: http://localhost:<port> is another site than http://127.0.0.1:<port>.
	pages := http.NewServeMux()
	pages.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, attackPage(r.URL.Query().Get("form"), r.URL.Query().Get("fetch")))
	})
	foreign := listenPages(t, pages)
	allowed := listenPages(t, pages)

	nodeAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	conf := filepath.Join(dir, "node.yaml")
	var b strings.Builder
	fmt.Fprintf(&b, "health_check:\n  address: %q\n  cors_origins: [%q]\nstreams:\n", nodeAddr, allowed)
	for _, id := range []string{"s1", "s2", "s3"} {
		fmt.Fprintf(&b, "  - id: %s\n    input: {type: generate, context: '{\"n\": 1}', interval: 100ms}\n    pipeline: {processors: []}\n    output: {type: drop}\n", id)
	}
	if err := os.WriteFile(conf, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	startChild(t, conf, filepath.Join(dir, "state"))
	waitListening(t, nodeAddr)
	node := "http://" + nodeAddr

	hubAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, "hub", []string{"SVC_HUB_ADDRESS=" + hubAddr, "SVC_HUB_STORAGE=" + filepath.Join(dir, "hub.db"),
		"SVC_OPERATOR_TOKEN=", "SVC_NODE_TOKEN=", "SVC_HUB_INSECURE_LOCAL=1", "SVC_HUB_CORS_ORIGINS=" + allowed}, "hub")
	hubURL := "http://" + hubAddr
	if !waitReadiness(hubURL, http.StatusOK, 20*time.Second) {
		t.Fatal("the Hub never answered /readiness 200")
	}
	hubStream := func(id string) string { return hubURL + "/api/v1/nodes/n1/streams/" + id }

	for _, id := range []string{"s1", "s2", "s3"} {
		waitUntil(t, "stream "+id+" running", func() bool {
			var s wire.Stream
			return getJSONStatusOK(node+"/streams/"+id, &s) && s.Observed.State == "running"
		})
	}

	br := newBrowser(t, hubURL)
	visit := func(origin, form, fetch string) string {
		t.Helper()
		br.run("open "+origin, chromedp.Navigate(origin+"/page?form="+form+"&fetch="+fetch))
		br.waitJS("the page's requests answered", `window.done === true`)
		out, err := eval[string](br, `window.fetchResult`)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// The attacks: a form POST and a fetch POST from the foreign site.
	visit(foreign, node+"/streams/s1/stop", node+"/streams/s2/stop")
	visit(foreign, hubStream("s1")+"/stop", hubStream("s2")+"/stop")
	// The control: the same fetch from the allowed origin runs (and, CORS
	// allowing it, the page may read the answer).
	if got := visit(allowed, "", node+"/streams/s3/stop"); got != "202" {
		t.Fatalf("fetch POST from the allowed origin to the node: %s, want 202", got)
	}
	if got := visit(allowed, "", hubStream("s3")+"/stop"); got != "202" {
		t.Fatalf("fetch POST from the allowed origin to the Hub: %s, want 202", got)
	}

	waitUntil(t, "s3 stopped by the allowed origin", func() bool {
		var s wire.Stream
		return getJSONStatusOK(node+"/streams/s3", &s) && s.Observed.State == "stopped"
	})
	for _, id := range []string{"s1", "s2"} {
		var s wire.Stream
		getJSON(t, node+"/streams/"+id, &s)
		if s.Observed.State != "running" {
			t.Errorf("node stream %s after the cross-site POSTs: %q, want running", id, s.Observed.State)
		}
	}
	var ops wire.Page[wire.Operation]
	getJSON(t, node+"/operations", &ops)
	if ops.Total != 1 || ops.Items[0].ResourceID != "s3" {
		t.Errorf("node operations: %+v, want only the allowed origin's stop of s3", ops.Items)
	}

	var s3 wire.Stream
	getJSON(t, hubStream("s3"), &s3)
	if s3.Desired.State != "stopped" {
		t.Errorf("Hub desired state of s3: %+v, want stopped", s3.Desired)
	}
	for _, id := range []string{"s1", "s2"} {
		if st, err := getJSONStatus(hubStream(id), new(wire.Stream)); err == nil || st != http.StatusNotFound {
			t.Errorf("Hub stream %s after the cross-site POSTs: %d, want 404 (nothing desired)", id, st)
		}
	}
}

// attackPage is an HTML page that submits a form POST to form (when set)
// into a frame, waits for its answer, then sends fetch POST to fetch (no
// body, no Content-Type: a "simple" request), and sets window.done.
// window.fetchResult is the answer's status when CORS lets the page read
// it, "opaque" when not, or the error.
func attackPage(form, fetch string) string {
	return fmt.Sprintf(`<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="f" method="post" action=%q target="sink"></form>
<script>
(async () => {
  const form = %q, target = %q;
  if (form) {
    const answered = new Promise(r => document.querySelector("iframe").addEventListener("load", r, {once: true}));
    document.getElementById("f").submit();
    await answered;
  }
  try {
    const r = await fetch(target, {method: "POST", mode: "cors"});
    window.fetchResult = String(r.status);
  } catch (e) {
    // Refused requests carry no CORS headers: the browser hides them.
    window.fetchResult = "error: " + e;
  }
  window.done = true;
})();
</script></body></html>`, form, form, fetch)
}

// listenPages serves h on 127.0.0.1 and returns its origin named with
// "localhost", a site other than the 127.0.0.1 of the APIs.
func listenPages(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
}

// getJSONStatusOK reports whether GET url answered 200 and decoded into v.
func getJSONStatusOK(url string, v any) bool {
	st, err := getJSONStatus(url, v)
	return err == nil && st == http.StatusOK
}
