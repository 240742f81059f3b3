package codec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/policy"
)

// TestProtoPolicyAtUse: the proto_inputs of Hub-delivered work are read
// through the remote policy's FS: a directory beneath the root compiles,
// one that has become a link out of it is refused naming the path and
// the rule.
func TestProtoPolicyAtUse(t *testing.T) {
	src, err := os.ReadFile("testdata/reading.proto")
	if err != nil {
		t.Fatal(err)
	}
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "protos"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(root, "protos"), outside} {
		if err := os.WriteFile(filepath.Join(d, "reading.proto"), src, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	res := component.Resources{FS: policy.Default(root).FS()}
	for _, in := range []string{filepath.Join(root, "protos"), filepath.Join(root, "protos", "reading.proto")} {
		if _, err := component.Default.NewCodec("protobuf", protoConf("example.v1.Reading", in), res); err != nil {
			t.Errorf("proto_inputs %s beneath the root: %v", in, err)
		}
	}
	for _, in := range []string{filepath.Join(root, "linked"), filepath.Join(root, "linked", "reading.proto")} {
		_, err := component.Default.NewCodec("protobuf", protoConf("example.v1.Reading", in), res)
		if !errors.Is(err, policy.ErrDenied) || !strings.Contains(err.Error(), in) || !strings.Contains(err.Error(), policy.RuleFileRoots) {
			t.Errorf("proto_inputs %s through a link out of the root: %v, want refused", in, err)
		}
	}
	in := filepath.Join(root, "linked", "reading.proto")
	if _, err := component.Default.NewCodec("protobuf", protoConf("example.v1.Reading", in), component.Resources{}); err != nil {
		t.Errorf("local work, %s: %v", in, err)
	}
}
