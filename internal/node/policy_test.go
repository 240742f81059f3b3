package node_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/node/history"
	"github.com/flowplane/flowplane/internal/policy"
	"github.com/flowplane/flowplane/internal/wire"
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

// TestHubPolicyAtUse: the files of a Hub configuration are checked again
// each time a component opens them, not only when the configuration
// arrives: a stream's output directory swapped for a link out of the
// state directory after the apply makes the stream's next start fail,
// naming the path and the rule, with nothing written outside. The owner's
// apply of the same text restarts the stream as local work, which follows
// the link.
func TestHubPolicyAtUse(t *testing.T) {
	rp := config.Default().RemotePolicy
	h := newHarness(t, doc(hcLocal, genStream("a", "a")), harnessOptions{policy: &rp})
	ctx := context.Background()
	dir, outside := filepath.Join(h.dir, "out"), t.TempDir()
	text := doc("", fileStream("w", filepath.Join(dir, "w.jsonl")))
	if _, err := h.n.ApplyHub(ctx, node.Document{Format: config.YAML, Content: []byte(text)}, nil, "v1", node.Request{Actor: "hub"}); err != nil {
		t.Fatalf("ApplyHub: %v", err)
	}
	h.waitInSync(t, "w")
	h.succeed(t, h.action(t, "w", "stop").OperationID)

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, dir); err != nil {
		t.Fatal(err)
	}
	h.waitOp(t, h.action(t, "w", "start").OperationID)
	var s wire.Stream
	eventually(t, "stream w to fail", func() (bool, string) {
		s = h.stream(t, "w")
		return s.Observed.State == "failed", s.Observed.State
	})
	if !strings.Contains(s.Observed.LastError, dir) || !strings.Contains(s.Observed.LastError, policy.RuleFileRoots) {
		t.Errorf("last_error %q does not name the path and the rule", s.Observed.LastError)
	}
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Fatalf("the Hub's stream wrote %v outside the state directory", es)
	}

	op, err := h.n.Apply(node.Document{Format: config.YAML, Content: []byte(text)}, node.Request{Actor: "owner"})
	if err != nil {
		t.Fatal(err)
	}
	h.succeed(t, op.OperationID)
	eventually(t, "the owner's stream to write through the link", func() (bool, string) {
		es, _ := os.ReadDir(outside)
		return len(es) > 0, h.stream(t, "w").Observed.State
	})
}

// TestHubPolicyBeforeBuild: a Hub configuration's files are refused by
// the policy before its components are built: a codec whose proto_inputs
// lie outside the roots is policy_denied, its file never compiled into a
// report (its text could be quoted there).
func TestHubPolicyBeforeBuild(t *testing.T) {
	rp := config.Default().RemotePolicy
	h := newHarness(t, doc(hcLocal, genStream("a", "a")), harnessOptions{policy: &rp})
	secret := filepath.Join(t.TempDir(), "secret.proto")
	if err := os.WriteFile(secret, []byte("TOPSECRET line one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := doc("", fmt.Sprintf("  - id: p\n    input: {type: generate, context: '{}', count: 1, codec: {type: protobuf, message_type: x.Y, proto_inputs: [%q]}}\n    pipeline: {processors: []}\n    output: {type: drop}\n", secret))
	rep, err := h.n.ValidateHub(node.Document{Format: config.YAML, Content: []byte(text)}, nil)
	if !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("ValidateHub = %v (report %+v), want policy_denied", err, rep)
	}
	if fmt.Sprint(rep) == "" || strings.Contains(fmt.Sprint(rep), "TOPSECRET") {
		t.Errorf("report %+v", rep)
	}
}
