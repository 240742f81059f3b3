package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/eventlog"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/node/history"
	"github.com/flowplane/flowplane/internal/wire"
)

const (
	hubSecretName  = "HUB_TEST_TOKEN"
	hubSecretValue = "hub-Resolved-7c1e-Secret-never-stored-anywhere"
)

// TestApplyHub: a configuration from the Hub with a ${secret:} reference
// the Hub resolved runs with the value, is kept with the reference, and
// the value shows in no history file, report, event, error, response or
// log line.
func TestApplyHub(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Api-Key"))
		mu.Unlock()
	}))
	t.Cleanup(sink.Close)
	logs := &syncBuffer{}
	h := newHarness(t, doc(hcLocal, genStream("a", "a")), harnessOptions{logs: logs})
	ctx := context.Background()
	ref := "${secret:" + hubSecretName + "}"
	secrets := map[string]string{hubSecretName: hubSecretValue}
	text := doc(hcLocal, genStream("a", "a"), httpStream("sink", sink.URL, "Bearer "+ref))
	hubDoc := node.Document{Format: config.YAML, Content: []byte(text)}
	var leaks []string // every text shown that must not hold the value

	// Validation: the Hub's secrets resolve the reference; without them it
	// does not, and the report names the reference, not a value.
	rep, _ := h.n.ValidateHub(hubDoc, secrets)
	if !rep.Valid {
		t.Fatalf("ValidateHub with the Hub's secrets: %+v", rep)
	}
	rep, _ = h.n.ValidateHub(hubDoc, nil)
	if rep.Valid || !strings.Contains(mustString(t, rep), hubSecretName) {
		t.Errorf("ValidateHub without secrets: %+v, want invalid naming %s", rep, hubSecretName)
	}
	// A value in a field that refuses it: the problem must not quote it.
	bad := doc(hcLocal, "  - id: x\n    input: {type: generate, context: x, interval: '"+ref+"'}\n    pipeline: {processors: []}\n    output: {type: drop}\n")
	badDoc := node.Document{Format: config.YAML, Content: []byte(bad)}
	if rep, _ := h.n.ValidateHub(badDoc, secrets); rep.Valid {
		t.Errorf("a secret interval validated")
	} else {
		leaks = append(leaks, mustString(t, rep))
	}
	_, err := h.n.ApplyHub(ctx, badDoc, secrets, "v2", node.Request{Actor: "hub", CorrelationID: "cmd-bad"})
	var ve *node.ValidationError
	if !errors.As(err, &ve) || ve.Report.Valid {
		t.Fatalf("ApplyHub of an invalid document: err = %v, want a *ValidationError", err)
	}
	leaks = append(leaks, err.Error(), mustString(t, ve.Report))
	if n := len(h.hist.List()); n != 1 {
		t.Errorf("a refused apply left %d versions, want 1", n)
	}

	// Apply: only the new stream starts.
	genA := h.stream(t, "a").Desired.Generation
	res, err := h.n.ApplyHub(ctx, hubDoc, secrets, "v3", node.Request{Actor: "hub", CorrelationID: "cmd-1"})
	if err != nil {
		t.Fatalf("ApplyHub: %v", err)
	}
	want := wire.ConfigApplyResult{ConfigVersion: "v3", NodeVersion: "v2", Added: []string{"sink"}, Removed: []string{}, Changed: []string{}, Unchanged: []string{"a"}}
	if d := cmp.Diff(want, res); d != "" {
		t.Errorf("ApplyHub result (-want +got):\n%s", d)
	}
	leaks = append(leaks, mustString(t, res))
	if g := h.stream(t, "a").Desired.Generation; g != genA {
		t.Errorf("unchanged stream a went from generation %d to %d", genA, g)
	}
	if got := h.n.ConfigVersion(); got != "v2" {
		t.Errorf("applied version %s, want v2", got)
	}
	eventually(t, "the sink got the resolved header", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(seen, "Bearer "+hubSecretValue), strings.Join(seen[max(0, len(seen)-1):], "")
	})
	v, err := h.hist.Get("v2")
	if err != nil {
		t.Fatal(err)
	}
	if v.Source != history.SourceHub || v.HubVersion != "v3" || v.Actor != "hub" || v.CorrelationID != "cmd-1" || string(v.Content) != text {
		t.Errorf("stored version: source %q hub %q actor %q correlation %q, text kept: %v", v.Source, v.HubVersion, v.Actor, v.CorrelationID, string(v.Content) == text)
	}
	var applied *wire.Event
	for _, ev := range h.events.Query(eventlog.Filter{}, 1, 1000).Items {
		if ev.Kind == wire.EventConfigurationApplied && ev.CorrelationID == "cmd-1" {
			applied = &ev
		}
	}
	if applied == nil || applied.Data["hub_version"] != "v3" || applied.Data["config_version"] != "v2" {
		t.Errorf("configuration_applied event %+v, want config_version v2 and hub_version v3", applied)
	}
	versions := string(h.expect(t, 200, "GET", "/configuration/versions", "").Body)
	if strings.Count(versions, `"hub_version":"v3"`) != 1 || strings.Count(versions, `"hub_version"`) != 1 {
		t.Errorf("GET /configuration/versions: want hub_version v3 on v2 only: %s", versions)
	}

	// Diff of two given texts, masked as Diff is.
	lit := doc(hcLocal, genStream("a", "a"), httpStream("sink", sink.URL, "literal-credential-0123456789"))
	dr, err := h.n.DiffTexts(wire.ConfigDiffSide{Version: "v3", ConfigDocument: wire.ConfigDocument{Format: "yaml", Content: text}},
		wire.ConfigDiffSide{Version: "v4", ConfigDocument: wire.ConfigDocument{Format: "yaml", Content: lit}})
	if err != nil {
		t.Fatal(err)
	}
	if dr.From != "v3" || dr.To != "v4" || !slices.Equal(dr.Summary.Changed, []string{"sink"}) || !slices.Equal(dr.Summary.Unchanged, []string{"a"}) {
		t.Errorf("DiffTexts: %+v", dr)
	}
	if strings.Contains(dr.Unified, "literal-credential-0123456789") || !strings.Contains(dr.Unified, "+++ v4") {
		t.Errorf("DiffTexts unified diff unmasked or unnamed:\n%s", dr.Unified)
	}
	if _, err := h.n.DiffTexts(wire.ConfigDiffSide{ConfigDocument: wire.ConfigDocument{Format: "xml"}}, wire.ConfigDiffSide{ConfigDocument: wire.ConfigDocument{Format: "yaml"}}); err == nil {
		t.Errorf("DiffTexts of an xml side: no error")
	}

	// The Hub's rollback to the node's own version.
	res, err = h.n.ReapplyVersion(ctx, "v1", node.Request{Actor: "hub", CorrelationID: "cmd-2"})
	if err != nil {
		t.Fatalf("ReapplyVersion: %v", err)
	}
	want = wire.ConfigApplyResult{NodeVersion: "v3", Added: []string{}, Removed: []string{"sink"}, Changed: []string{}, Unchanged: []string{"a"}}
	if d := cmp.Diff(want, res); d != "" {
		t.Errorf("ReapplyVersion result (-want +got):\n%s", d)
	}
	if _, err := h.n.ReapplyVersion(ctx, "v99", node.Request{Actor: "hub"}); !errors.Is(err, node.ErrVersionNotFound) {
		t.Errorf("ReapplyVersion of an unknown version: err = %v, want ErrVersionNotFound", err)
	}

	// Nowhere: files under the state directory, API answers, events, logs.
	err = filepath.WalkDir(h.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), hubSecretValue) {
			t.Errorf("%s holds the secret value", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/configuration", "/configuration/versions", "/configuration/diff?from=v1&to=v2", "/events?page_size=100", "/operations?page_size=100", "/streams"} {
		leaks = append(leaks, string(h.expect(t, 200, "GET", path, "").Body))
	}
	leaks = append(leaks, mustString(t, h.events.Query(eventlog.Filter{}, 1, 1000).Items), logs.String())
	for _, s := range leaks {
		if strings.Contains(s, hubSecretValue) {
			t.Errorf("the secret value shows: %.400s", s)
		}
	}
	if !strings.Contains(string(h.expect(t, 200, "GET", "/configuration/diff?from=v1&to=v2", "").Body), hubSecretName) {
		t.Errorf("version v2 lost its reference")
	}
}

func mustString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
