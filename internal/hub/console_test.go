package hub

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/web/console"
)

// TestConsoleServed checks how the Hub serves its web console: open (no
// token) while the operator API is not, under a Content-Security-Policy
// that forbids inline script, with problems for what is not there.
func TestConsoleServed(t *testing.T) {
	th := serve(t, dbPath(t), "operator-token-0123456789", true)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, hdr ...string) resp {
		t.Helper()
		return roundTrip(t, noRedirect, th.request(t, t.Context(), "GET", path, "", hdr...))
	}

	root := get("/")
	if root.status != http.StatusFound || root.header.Get("Location") != console.Path {
		t.Fatalf("GET /: %d Location %q, want 302 to %s", root.status, root.header.Get("Location"), console.Path)
	}
	index := get(console.Path)
	if index.status != http.StatusOK || !strings.HasPrefix(index.header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s: %d %s", console.Path, index.status, index.header.Get("Content-Type"))
	}
	for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy"} {
		if index.header.Get(h) == "" {
			t.Errorf("GET %s has no %s", console.Path, h)
		}
	}
	csp := index.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "http") {
		t.Errorf("CSP %q allows inline code or another origin", csp)
	}
	// No inline script or style in the document the CSP covers, and every
	// resource it loads is the console's own.
	html := string(index.body)
	if m := regexp.MustCompile(`<script(?:[^>]*)>`).FindAllString(html, -1); len(m) == 0 {
		t.Fatal("index.html loads no script")
	} else {
		for _, tag := range m {
			if !strings.Contains(tag, `src="assets/`) {
				t.Errorf("inline or foreign script %q", tag)
			}
		}
	}
	if strings.Contains(html, "<style") || strings.Contains(html, " style=") || strings.Contains(html, "://") {
		t.Errorf("index.html has inline style or an absolute URL:\n%s", html)
	}
	for _, f := range []string{"assets/app.js", "assets/app.css"} {
		r := get(console.Path + f)
		if r.status != http.StatusOK || len(r.body) == 0 || r.header.Get("ETag") == "" {
			t.Fatalf("GET %s: %d, %d bytes, ETag %q", f, r.status, len(r.body), r.header.Get("ETag"))
		}
		if again := get(console.Path+f, "If-None-Match", r.header.Get("ETag")); again.status != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", f, again.status)
		}
	}
	info := decode[map[string]string](t, get(console.Path+"hub.json"))
	if info["api_prefix"] != APIPrefix {
		t.Errorf("hub.json %v, want api_prefix %s", info, APIPrefix)
	}

	// What is not there is a problem, not the index (no SPA fallback: the
	// console routes in the URL's fragment); a browser gets the console's
	// 404 page instead.
	missing := get(console.Path + "nope.js")
	if missing.status != http.StatusNotFound || missing.problem(t).Code != "not_found" {
		t.Fatalf("GET a missing file: %d %s", missing.status, missing.body)
	}
	page := get(console.Path+"unknown", "Accept", "text/html,*/*;q=0.8")
	if page.status != http.StatusNotFound || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(page.body), `data-page="not-found"`) || page.header.Get("Content-Security-Policy") != console.CSP {
		t.Fatalf("a browser's GET of a missing console page: %d %q %s", page.status, page.header.Get("Content-Type"), page.body)
	}
	if post := th.do(t, "POST", console.Path, "{}"); post.status != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d, want 405", console.Path, post.status)
	}
	// The operator API is still closed without the token.
	if r := get(APIPrefix + "/status"); r.status != http.StatusUnauthorized {
		t.Errorf("GET /status without a token: %d", r.status)
	}
}
