package node_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/node/history"
	"github.com/flowplane/flowplane/internal/policy"
)

// fileStream is a stream writing to path.
func fileStream(id, path string) string {
	return fmt.Sprintf("  - id: %s\n    input: {type: generate, context: '{}', interval: 10ms, batch_size: 1}\n    pipeline: {processors: []}\n    output: {type: file, path: %q}\n", id, path)
}

// TestHubPolicy: the node's remote policy refuses a Hub configuration
// (validate, apply, the Hub's re-apply of a Hub version) before anything
// is kept or runs, naming the path and the rule; the node's owner applies
// the same text through the Node API.
func TestHubPolicy(t *testing.T) {
	rp := config.Default().RemotePolicy
	h := newHarness(t, doc(hcLocal, genStream("a", "a")), harnessOptions{policy: &rp})
	ctx := context.Background()
	outside := filepath.Join(t.TempDir(), "authorized_keys")
	refused := node.Document{Format: config.YAML, Content: []byte(doc("", fileStream("w", outside)))}
	inside := node.Document{Format: config.YAML, Content: []byte(doc("", fileStream("w", filepath.Join(h.dir, "out", "w.jsonl"))))}
	env := node.Document{Format: config.YAML, Content: []byte(doc("", genStream("e", "${env:HOME}")))}
	section := node.Document{Format: config.YAML, Content: []byte("remote_policy: {file_roots: [/]}\n" + doc("", genStream("e", "x")))}
	before := len(mustVersions(t, h))

	wantDenied := func(t *testing.T, err error, want string) {
		t.Helper()
		var pe *policy.Error
		if !errors.As(err, &pe) || !errors.Is(err, policy.ErrDenied) || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want a *policy.Error holding %q", err, want)
		}
	}
	for _, tt := range []struct {
		name string
		d    node.Document
		want string
	}{
		{"a file outside the roots", refused, "streams[0].output.path: " + outside + " is outside the allowed file roots (remote_policy.file_roots)"},
		{"an env reference", env, "streams[0].input.context: ${env:HOME} reads the node's environment"},
		{"a remote_policy section", section, "remote_policy: a configuration from the Hub may not set the node's remote policy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := h.n.ValidateHub(tt.d, nil)
			wantDenied(t, err, tt.want)
			if rep.Valid || len(rep.Errors) == 0 {
				t.Errorf("report %+v, want the refusals", rep)
			}
			_, err = h.n.ApplyHub(ctx, tt.d, nil, "v9", node.Request{Actor: "hub"})
			wantDenied(t, err, tt.want)
		})
	}
	if n := len(mustVersions(t, h)); n != before {
		t.Fatalf("refused applies kept %d versions", n-before)
	}
	if _, err := h.n.ApplyHub(ctx, inside, nil, "v10", node.Request{Actor: "hub"}); err != nil {
		t.Fatalf("ApplyHub beneath the state directory: %v", err)
	}

	// A Hub version the policy refuses now (kept before it was
	// tightened): the Hub's re-apply is refused, the owner's is not.
	v, err := h.hist.Append(refused.Content, refused.Format, history.SourceHub, history.Meta{HubVersion: "v8"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.n.ReapplyVersion(ctx, v.ID, node.Request{Actor: "hub"})
	wantDenied(t, err, "is outside the allowed file roots")
	op, err := h.n.ApplyVersion(v.ID, node.Request{Actor: "operator"})
	if err != nil {
		t.Fatalf("the owner's apply of the same version: %v", err)
	}
	if _, err := h.n.WaitOperation(ctx, op.OperationID); err != nil {
		t.Fatal(err)
	}
}

func mustVersions(t *testing.T, h *harness) []history.Version {
	t.Helper()
	vs, err := h.n.Versions()
	if err != nil {
		t.Fatal(err)
	}
	return vs
}
