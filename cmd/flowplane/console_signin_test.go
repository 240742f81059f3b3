package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/idp/testop"
)

// TestHubConsoleSignIn signs in to the console through a real OpenID
// Provider's login page (authorization code with PKCE): the console names
// the user, the operator's write from the console is audited under the
// user's name, signing out ends the session, and a viewer signed in the
// same way gets a console whose writes are disabled.
func TestHubConsoleSignIn(t *testing.T) {
	const audience = "flowplane-hub"
	op, err := testop.Start(testop.Options{Audience: audience, Principals: []testop.Principal{
		{Name: "otto", Secret: "otto-secret", Password: "otto-password", Roles: []string{"operator"}},
		{Name: "vera", Secret: "vera-secret", Password: "vera-password", Roles: []string{"viewer"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { op.Close() })
	dir := t.TempDir()
	h := &fleetHub{owner: t, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), storage: filepath.Join(dir, "hub.db"),
		env: []string{hub.EnvOIDCIssuer + "=" + op.Issuer, hub.EnvOIDCAudience + "=" + audience, hub.EnvOIDCClientID + "=" + audience}}
	h.start(t)

	b := newBrowser(t, h.url())
	signIn := func(user, password string) {
		b.open("", "login")
		b.waitJS("the provider's sign-in", `document.querySelector('a[data-sign-in=provider]')`)
		b.run("sign in with the provider", chromedp.Click(chromedp.CSS(`a[data-sign-in=provider]`)))
		b.waitJS("the provider's login page", `document.querySelector('#username')`)
		b.run("log in at the provider", chromedp.SendKeys(chromedp.CSS("#username"), user), chromedp.SendKeys(chromedp.CSS("#password"), password),
			chromedp.Click(chromedp.CSS("#submit")))
		b.waitJS("the user's name", fmt.Sprintf(`document.querySelector('[data-principal=%q]')`, user))
	}
	signIn("otto", "otto-password")
	b.screenshot("signed-in-through-provider")
	// A write from the console's page: the browser sends the session
	// cookie, its Origin and Sec-Fetch-Site.
	status, err := fetchStatus(b, `fetch("/api/v1/nodes/node-a/streams/orders/desired-state", {method: "PUT",
		headers: {"Content-Type": "application/json"}, body: '{"state":"running"}'}).then(r => r.status)`)
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("the operator's write from the console: %d %v", status, err)
	}
	b.goTo("#/audit", "audit")
	b.waitJS("the operator's name and kind in the audit", `document.querySelector("main").innerText.includes("otto (oidc)")`)
	audit, err := auditOf(h, "actor=otto&outcome=accepted")
	if err != nil || audit.Total < 1 || audit.Items[0].Actor != "otto" || audit.Items[0].ActorKind != "oidc" {
		t.Fatalf("audit of otto: %+v %v", audit, err)
	}

	// Sign out: the Hub ends the session, and the console asks again.
	b.run("sign out", js(`[...document.querySelectorAll("header button")].find(e => e.innerText.trim() === "Sign out").click()`))
	b.waitJS("the sign-in page", `document.querySelector('main[data-page=login]')`)
	if s, err := fetchStatus(b, `fetch("/api/v1/auth/whoami").then(r => r.status)`); err != nil || s != http.StatusUnauthorized {
		t.Fatalf("whoami after sign-out: %d %v", s, err)
	}

	signIn("vera", "vera-password")
	b.goTo("#/nodes/node-a/streams/orders", "stream")
	b.waitJS("the write buttons", `document.querySelectorAll("main [data-write]").length >= 3`)
	b.waitJS("the stream's events", `document.querySelector("main").innerText.includes("intent accepted")`)
	b.screenshot("viewer-through-provider")
	if ok, err := eval[bool](b, `[...document.querySelectorAll("main [data-write]")].every(e => e.disabled && e.title === "Your role may only read")`); err != nil || !ok {
		t.Fatalf("a viewer's console offers writes (%v): %s", err, b.text())
	}
	if s, err := fetchStatus(b, `fetch("/api/v1/nodes/node-a/streams/orders/desired-state", {method: "PUT",
		headers: {"Content-Type": "application/json"}, body: '{"state":"stopped"}'}).then(r => r.status)`); err != nil || s != http.StatusForbidden {
		t.Fatalf("a viewer's write forced from the console: %d %v", s, err)
	}
}

// fetchStatus runs a fetch on the console's page and returns its status.
func fetchStatus(b *browser, expr string) (int, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[int](expr, chromedp.EvalAwaitPromise))
}
