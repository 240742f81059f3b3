package node_test

import (
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/wire"
)

const (
	literalNodeToken = "node-token-LITERAL-7f3a91"
	literalBearer    = "bearer-LITERAL-c04e"
	literalDraft     = "draft-token-LITERAL-55d1"
)

// credentialsDoc is a node whose Node API has no token, with a literal
// node_token, a literal bearer token and a referenced password; extra
// streams follow.
func credentialsDoc(nodeToken string, extra ...string) string {
	return doc(hcLocal+"  node_token: "+nodeToken+"\n", append([]string{genStream("a", "a"), `  - id: sink
    input: {type: http, address: "127.0.0.1:0", path: /in, auth: {type: bearer, token: "` + literalBearer + `"}}
    pipeline: {processors: []}
    output: {type: drop}
  - id: ref
    input: {type: http, address: "127.0.0.1:0", path: /in, auth: {type: basic, username: u, password: "${env:` + secretVar + `}"}}
    pipeline: {processors: []}
    output: {type: drop}
`}, extra...)...)
}

// TestCredentialsNeverServed: every route that returns configuration text
// masks literal credentials and shows references as written; the stored
// text keeps them, so a rollback still runs with them.
func TestCredentialsNeverServed(t *testing.T) {
	t.Setenv(secretVar, secretValue)
	h := newHarness(t, credentialsDoc(literalNodeToken))
	draft := credentialsDoc(literalDraft, genStream("c", "c"))

	var served []response
	keep := func(r response) response { served = append(served, r); return r }
	conf := decode[struct{ Content string }](t, keep(h.expect(t, 200, "GET", "/configuration", "")))
	keep(h.expect(t, 200, "GET", "/config", ""))
	put := keep(h.expect(t, 200, "PUT", "/configuration/draft", configBody(t, "yaml", draft)))
	keep(h.expect(t, 200, "GET", "/configuration/draft", ""))
	diff := decode[struct{ Unified string }](t, keep(h.expect(t, 200, "GET", "/configuration/diff", "")))
	apply := decode[wire.Operation](t, keep(h.expect(t, 202, "POST", "/configuration/apply", configBody(t, "yaml", draft))))
	h.succeed(t, apply.OperationID)
	keep(h.expect(t, 200, "GET", "/configuration/diff?from=v1&to=v2", ""))
	keep(h.expect(t, 200, "GET", "/configuration/versions", ""))
	for _, r := range served {
		for _, lit := range []string{literalNodeToken, literalBearer, literalDraft, secretValue} {
			if strings.Contains(string(r.Body), lit) {
				t.Errorf("a response serves %q: %.400s", lit, r.Body)
			}
		}
	}
	putDraft := decode[struct{ Draft struct{ Content string } }](t, put)
	for name, text := range map[string]string{"configuration": conf.Content, "draft answer": putDraft.Draft.Content} {
		if !strings.Contains(text, "node_token: "+config.Mask) || !strings.Contains(text, "token: "+`"`+config.Mask+`"`) {
			t.Errorf("%s does not show the masks: %s", name, text)
		}
		if !strings.Contains(text, "${env:"+secretVar+"}") {
			t.Errorf("%s lost the reference: %s", name, text)
		}
	}
	// The changed node_token is masked on both sides: only the new stream shows.
	if !strings.Contains(diff.Unified, "+  - id: c") || strings.Contains(diff.Unified, "node_token") {
		t.Errorf("diff: %s", diff.Unified)
	}

	// The history keeps the text as written: rolling back to v1 runs it.
	v1, err := h.hist.Get("v1")
	if err != nil || !strings.Contains(string(v1.Content), literalNodeToken) {
		t.Fatalf("stored v1 lost its text: %v %s", err, v1.Content)
	}
	rb := decode[wire.Operation](t, h.expect(t, 202, "POST", "/configuration/rollback/v1", ""))
	h.succeed(t, rb.OperationID)
	h.waitInSync(t, "ref")
	if c := string(h.expect(t, 200, "GET", "/configuration", "").Body); strings.Contains(c, literalNodeToken) || !strings.Contains(c, `"id":"v3"`) {
		t.Errorf("after rollback: %s", c)
	}
}
