package operator_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tetratelabs/wazero/sys"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// buildWasm builds the udf module testdata/udf/<name> for GOOS=wasip1 as a
// reactor (-buildmode=c-shared) and returns its path.
func buildWasm(t *testing.T, name string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build the test module:", err)
	}
	out := filepath.Join(t.TempDir(), name+".wasm")
	cmd := exec.Command(goTool, "build", "-buildmode=c-shared", "-o", out, "./testdata/udf/"+name)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, b)
	}
	return out
}

func udfOp(module, function string) *job.Operator {
	return &job.Operator{ID: "u", Kind: "udf", UDF: &job.UDFConfig{Module: module, Function: function}}
}

func TestUDF(t *testing.T) {
	upper := buildWasm(t, "upper")
	loop := buildWasm(t, "loop")

	t.Run("results replace the records, null drops", func(t *testing.T) {
		h := start(t, udfOp(upper, "upper"), nil, nil)
		defer h.op.Close(context.Background())
		h.mustProcess(
			rec(1, obj("name", "ann", "n", 1.0)),
			rec(2, []byte(`{"name": "bob"}`)), // passed as it is: 15 bytes
			rec(3, obj("drop", true)),
			rec(4, "not an object"),
		)
		h.mustProcess(rec(5, obj("name", "cy")))
		var got []operator.Record
		for _, r := range h.take() {
			got = append(got, operator.Record{Value: r.Data(), Time: r.Time})
		}
		want := []operator.Record{
			rec(1, obj("name", "ANN", "n", 1.0, "len", 20.0)),
			rec(2, obj("name", "BOB", "len", 15.0)),
			rec(4, obj("error", "not an object")),
			rec(5, obj("name", "CY", "len", 13.0)),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})

	t.Run("sandbox: no files, bounded memory", func(t *testing.T) {
		h := start(t, udfOp(upper, "upper"), nil, nil)
		defer h.op.Close(context.Background())
		h.mustProcess(rec(1, obj("read", "/etc/hostname")), rec(2, obj("alloc_mib", 16.0)))
		out := h.take()
		if len(out) != 2 {
			t.Fatalf("%d results, want 2", len(out))
		}
		if msg, _ := out[0].Data().(map[string]any)["read_error"].(string); msg == "" {
			t.Errorf("the module read a host file: %v", out[0].Data())
		}
		if got := out[1].Data().(map[string]any)["allocated"]; got != float64(16<<20) {
			t.Errorf("allocated %v, want 16 MiB", got)
		}
		if err := h.process(rec(3, obj("alloc_mib", 256.0))); err == nil {
			t.Error("256 MiB allocated past the 128 MiB limit")
		}
	})

	t.Run("a call that never returns is stopped by the context", func(t *testing.T) {
		h := start(t, udfOp(loop, "spin"), nil, nil)
		defer h.op.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err := h.op.Process(ctx, []operator.Record{rec(1, obj())}, &h.out)
		var exit *sys.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != sys.ExitCodeDeadlineExceeded {
			t.Fatalf("error %v, want the deadline's exit", err)
		}
		if !strings.HasPrefix(err.Error(), "operator u: udf spin: ") {
			t.Errorf("error %q does not name the operator and function", err)
		}
	})

	notWasm := filepath.Join(t.TempDir(), "not.wasm")
	if err := os.WriteFile(notWasm, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name             string
		module, function string
		err              string
	}{
		{"missing module", filepath.Join(t.TempDir(), "none.wasm"), "f", "operator u: config.module: open "},
		{"not WebAssembly", notWasm, "f", "operator u: config.module: " + notWasm + ": "},
		{"no such function", upper, "lower", "operator u: config.module: " + upper + `: it exports no function "lower"`},
		{"wrong signature", upper, "alloc", `its function "alloc" is (i32) -> (i32), want (i32, i32) -> (i64)`},
		{"no function", upper, "", "operator u: config.function: required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := operator.New(udfOp(tt.module, tt.function))
			checkErr(t, err, tt.err)
		})
	}
}

// TestUDFModuleConfined: a Hub job's udf module is read through its
// confined FS: outside the root, or through a link out of it, it is
// refused before it is read.
func TestUDFModuleConfined(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	module := filepath.Join(outside, "evil.wasm")
	if err := os.WriteFile(module, []byte("\x00asm"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "mods")); err != nil {
		t.Fatal(err)
	}
	fsys := sandbox.Confine([]string{root}, "remote_policy.file_roots")
	for _, m := range []string{module, filepath.Join(root, "mods", "evil.wasm")} {
		_, err := operator.NewIn(udfOp(m, "f"), fsys)
		if !errors.Is(err, sandbox.ErrDenied) || !strings.Contains(err.Error(), m) {
			t.Errorf("module %s: %v, want refused naming it", m, err)
		}
	}
}
