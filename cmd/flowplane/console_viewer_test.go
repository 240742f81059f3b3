package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestHubConsoleViewer signs in to the console with a viewer's named
// token: the console names the principal and disables every write; a write
// forced by hand with that token is 403 and audited under its name; the
// bootstrap token's console may write.
func TestHubConsoleViewer(t *testing.T) {
	dir := t.TempDir()
	tok, sum, err := access.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens")
	line := access.NamedToken{Name: "vera", Role: access.Viewer, SHA256: sum}.Line()
	if err := os.WriteFile(tokens, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &fleetHub{owner: t, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), storage: filepath.Join(dir, "hub.db"),
		env: []string{hub.EnvTokensFile + "=" + tokens}}
	h.start(t)
	put := func(bearer string) int {
		req, err := http.NewRequest("PUT", h.url()+"/api/v1/nodes/node-a/streams/orders/desired-state", strings.NewReader(`{"state":"running"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+bearer)
		req.Header.Set("Content-Type", "application/json")
		res, err := fleetHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if s := put(fleetOperatorToken); s != http.StatusAccepted {
		t.Fatalf("admin write: %d", s)
	}

	b := newBrowser(t, h.url())
	signIn := func(token, principal string) {
		b.open("", "login")
		b.run("sign in", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS(`form[data-form=login] button[type=submit]`)))
		b.waitJS("the principal's name", fmt.Sprintf(`document.querySelector('[data-principal=%q]')`, principal))
		b.goTo("#/nodes/node-a/streams/orders", "stream")
		b.waitJS("the write buttons", `document.querySelectorAll("main [data-write]").length >= 3`)
		// The stream loaded (its events show): the buttons are no longer
		// disabled for want of data.
		b.waitJS("the stream's events", `document.querySelector("main").innerText.includes("intent accepted")`)
	}
	signIn(tok, "vera")
	b.screenshot("viewer-stream")
	if ok, err := eval[bool](b, `[...document.querySelectorAll("main [data-write]")].every(e => e.disabled && e.title === "Your role may only read")`); err != nil || !ok {
		t.Fatalf("a viewer's console offers writes (%v): %s", err, b.text())
	}
	if s := put(tok); s != http.StatusForbidden {
		t.Fatalf("a viewer's write forced by hand: %d", s)
	}
	audit, err := auditOf(h, "actor=vera&outcome=rejected")
	if err != nil || audit.Total != 1 || audit.Items[0].FailureCode != "forbidden" {
		t.Fatalf("audit of vera: %+v %v", audit, err)
	}

	b.run("sign out", js(`sessionStorage.clear()`))
	signIn(fleetOperatorToken, hub.PrincipalOperator)
	b.waitJS("an enabled write", `[...document.querySelectorAll("main [data-write]")].some(e => !e.disabled)`)
	if ok, err := eval[bool](b, `[...document.querySelectorAll("main [data-write]")].some(e => e.title !== "")`); err != nil || ok {
		t.Fatalf("the bootstrap token's console marks writes read-only (%v)", err)
	}
}

// auditOf reads the Hub's audit rows matching query, as the bootstrap
// operator.
func auditOf(h *fleetHub, query string) (wire.Page[wire.AuditRecord], error) {
	var audit wire.Page[wire.AuditRecord]
	req, err := http.NewRequest("GET", h.url()+"/api/v1/audit?"+query, nil)
	if err != nil {
		return audit, err
	}
	req.Header.Set("Authorization", "Bearer "+fleetOperatorToken)
	res, err := fleetHTTP.Do(req)
	if err != nil {
		return audit, err
	}
	defer res.Body.Close()
	err = json.NewDecoder(res.Body).Decode(&audit)
	return audit, err
}
