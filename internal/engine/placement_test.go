package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/job"
)

// TestSplitCheck: a split placement is refused, with the sentinel callers
// branch on and a message naming what is wrong, unless it places exactly
// the plan's tasks, at least one of them on this node, every other node
// has a data address and a data-plane fingerprint (a link never goes
// without TLS), and the secret is long enough; never with the
// secret in the message.
func TestSplitCheck(t *testing.T) {
	plan := &job.Plan{Tasks: []job.Task{{ID: "src#0"}, {ID: "counts#0"}, {ID: "counts#1"}}}
	secret := []byte("0123456789abcdef-the-data-secret")
	fpA, fpB := dataplane.FingerprintOf([]byte("a")), dataplane.FingerprintOf([]byte("b"))
	good := func() *split {
		return &split{
			taskNodes:     map[string]string{"src#0": "a", "counts#0": "a", "counts#1": "b"},
			dataAddresses: map[string]string{"a": "10.0.0.1:7000", "b": "10.0.0.2:7000"},
			fingerprints:  map[string]string{"a": fpA, "b": fpB},
			secret:        secret,
		}
	}
	dp := &dataplane.Server{} // check only asks whether there is one
	cases := []struct {
		name string
		edit func(*split)
		dp   *dataplane.Server
		self string
		kind error
		says string
	}{
		{"fits", nil, dp, "a", nil, ""},
		{"fits the other node", nil, dp, "b", nil, ""},
		{"own address not needed", func(s *split) { delete(s.dataAddresses, "b") }, dp, "b", nil, ""},
		{"no data plane", nil, nil, "a", ErrNoDataPlane, `job "j" is placed split over nodes but this node has no data plane (health_check.data_port)`},
		{"no node id", nil, dp, "", ErrSplitPlacement, "no node id"},
		{"no secret", func(s *split) { s.secret = nil }, dp, "a", ErrSplitPlacement, "data secret of at least 16 bytes"},
		{"short secret", func(s *split) { s.secret = secret[:15] }, dp, "a", ErrSplitPlacement, "data secret of at least 16 bytes"},
		{"task not placed", func(s *split) { delete(s.taskNodes, "counts#1") }, dp, "a", ErrSplitPlacement, "does not place its tasks counts#1"},
		{"task placed nowhere", func(s *split) { s.taskNodes["counts#1"] = "" }, dp, "a", ErrSplitPlacement, "does not place its tasks counts#1"},
		{"unknown task", func(s *split) { s.taskNodes["counts#2"] = "b" }, dp, "a", ErrSplitPlacement, "plan does not have: counts#2"},
		{"peer without address", func(s *split) { delete(s.dataAddresses, "b") }, dp, "a", ErrSplitPlacement, "no data address for nodes b"},
		{"none here", nil, dp, "c", ErrSplitPlacement, `none of its tasks is placed on this node "c"`},
		{"own fingerprint not needed", func(s *split) { delete(s.fingerprints, "b") }, dp, "b", nil, ""},
		{"peer without fingerprint", func(s *split) { delete(s.fingerprints, "b") }, dp, "a", ErrSplitPlacement, "no data-plane certificate fingerprint for nodes b"},
		{"peer with a malformed fingerprint", func(s *split) { s.fingerprints["b"] = "md5:00" }, dp, "a", ErrSplitPlacement, "no data-plane certificate fingerprint for nodes b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := good()
			if c.edit != nil {
				c.edit(s)
			}
			err := s.check("j", plan, c.dp, c.self)
			if c.kind == nil {
				if err != nil {
					t.Fatalf("check = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, c.kind) {
				t.Fatalf("check = %v, want %v", err, c.kind)
			}
			if !strings.Contains(err.Error(), c.says) || !strings.HasPrefix(err.Error(), `job "j" `) {
				t.Errorf("message %q does not say %q", err, c.says)
			}
			if strings.Contains(err.Error(), string(secret[:15])) {
				t.Errorf("message %q holds the secret", err)
			}
		})
	}
}

func TestNamedBounds(t *testing.T) {
	if got := named([]string{"a", "b", "c", "d", "e", "f", "g"}); got != "a, b, c, d, e and 2 more" {
		t.Errorf("named = %q", got)
	}
}
