package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/kernel"
	"github.com/flowplane/flowplane/internal/state"
)

// TestGenerateRescaleExactlyOnce stops generate (split) -> a keyed
// aggregate -> the file output's two-phase commit after some checkpoints,
// with data in flight, and restores it at another parallelism of every
// operator: the sources redistribute their read positions, the aggregate
// its key groups, and every key's running count is committed exactly once
// (no gap, no repeat). Afterwards the sink's pending directory is empty
// (a scale-down leaves no in-progress file of a subtask that is gone) and
// the artifact store holds only complete checkpoints, at most retention.
func TestGenerateRescaleExactlyOnce(t *testing.T) {
	for _, tc := range []struct{ from, to int }{{2, 3}, {3, 1}} {
		t.Run(fmt.Sprintf("%d to %d", tc.from, tc.to), func(t *testing.T) {
			const n, keys = 6000, 7
			outDir, store, root := t.TempDir(), t.TempDir(), t.TempDir()
			build := func(par int) *kernel.Job {
				spec, _ := countJob(t, "rescale", n, outDir, store, 20)
				spec.Parallelism = par
				spec.State.Root = root
				spec.Sources[0].Config["interval"] = "2ms"
				p, probs := job.Build("jobs[0]", spec)
				if len(probs) > 0 {
					t.Fatal(probs)
				}
				j, err := kernel.Build("jobs[0]", p, kernel.Options{Registry: component.Default, Spec: &spec})
				if err != nil {
					t.Fatal(err)
				}
				return j
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()

			first := build(tc.from)
			runUntilCheckpoint(t, ctx, first, 3)
			cps, err := first.Artifacts(ctx, state.KindCheckpoint)
			if err != nil || len(cps) == 0 {
				t.Fatalf("checkpoints of the first run: %v, %v", cps, err)
			}
			last := cps[len(cps)-1]
			if len(last.Sources) != tc.from {
				t.Fatalf("checkpoint %d holds %d source positions, want %d", last.ID, len(last.Sources), tc.from)
			}
			var emitted int64
			for _, s := range last.Sources {
				var pos struct{ Emitted int64 }
				if err := json.Unmarshal(s.Position, &pos); err != nil {
					t.Fatal(err)
				}
				emitted += pos.Emitted
			}
			if emitted >= n {
				t.Fatalf("the first run's checkpoint %d covers all %d records: nothing is left to redistribute", last.ID, n)
			}
			first.Close()

			second := build(tc.to)
			defer second.Close()
			if err := second.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if o := second.Observe(); o.State != kernel.Completed || !strings.HasPrefix(o.RestoredFrom, "checkpoint ") {
				t.Fatalf("second run: %+v", o)
			}
			checkExactlyOnce(t, outDir, n, keys)

			pending, err := os.ReadDir(filepath.Join(outDir, ".counts.jsonl.pending"))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range pending {
				t.Errorf("left in the pending directory: %s", e.Name())
			}
			dirs, err := os.ReadDir(filepath.Join(store, "rescale", "checkpoints"))
			if err != nil {
				t.Fatal(err)
			}
			if len(dirs) == 0 || len(dirs) > 2 {
				t.Errorf("%d checkpoint directories in the store, want 1 or 2 (retention 2)", len(dirs))
			}
			for _, d := range dirs {
				if _, err := os.Stat(filepath.Join(store, "rescale", "checkpoints", d.Name(), "_manifest.json")); err != nil {
					t.Errorf("checkpoint directory %s: %v", d.Name(), err)
				}
			}
		})
	}
}
