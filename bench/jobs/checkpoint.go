package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/kernel"
	"github.com/flowplane/flowplane/internal/state"
)

// checkpointJob keeps the last payload (about 1,000 random digits) of each
// of __KEYS__ keys: about __KEYS__ KiB of live state, checkpointed once, at
// the end of input.
const checkpointJob = `
streams: []
jobs:
  - id: bench-checkpoint
    version: 1
    operators:
      - {id: rows, kind: source}
      - id: latest
        kind: aggregate
        config:
          key: this.k
          aggregations: [{name: row, function: last, expression: this.pad}]
      - {id: out, kind: sink}
    edges:
      - {from: rows, to: latest}
      - {from: latest, to: out}
    sources:
      - operator_id: rows
        input_type: generate
        config:
          context: '{"k": {{count}}, "pad": "__PAD__"}'
          count: __KEYS__
          interval: 0s
          batch_size: 1024
    sinks:
      - {operator_id: out, output_type: drop}
    state: {backend: embedded_kv}
    checkpoint:
      interval_ms: 3600000
      retention: 1
      object_store_uri: __CHECKPOINTS__
`

// benchCheckpoint fills a job's state with about stateBytes, lets the final
// checkpoint take it, and then restores a fresh run from that checkpoint.
func benchCheckpoint(work string, stateBytes int64) error {
	keys := stateBytes / 1024
	tmpl := filepath.Join(work, "checkpoint.yaml")
	// About 1,000 random digits per key: compressible to roughly 40%, like
	// real data rather than a repeated byte.
	s := strings.NewReplacer("__PAD__", strings.Repeat("{{random}}", 170), "__KEYS__", strconv.FormatInt(keys, 10),
		"__CHECKPOINTS__", "file://"+filepath.Join(work, "checkpoints")).Replace(checkpointJob)
	if err := os.WriteFile(tmpl, []byte(s), 0o600); err != nil {
		return err
	}
	p, err := plan(tmpl, nil)
	if err != nil {
		return err
	}
	fmt.Printf("checkpoint of %d keys x about 1 KiB of random digits (%.2f GiB of values)\n", keys, float64(keys*1024)/(1<<30))
	root := filepath.Join(work, "state")
	r, err := run(p, root)
	if err != nil {
		return err
	}
	a, err := state.OpenArtifacts(context.Background(), p.Checkpoint.ObjectStoreURI)
	if err != nil {
		return err
	}
	defer a.Close()
	ms, err := a.List(context.Background(), p.JobID, state.KindCheckpoint)
	if err != nil || len(ms) == 0 {
		return fmt.Errorf("no checkpoint written (%v)", err)
	}
	last := ms[len(ms)-1]
	fmt.Printf("  fill + final checkpoint: %.2f s wall; checkpoint duration %d ms\n", r.wall.Seconds(), r.obs.CheckpointDurationMs)
	fmt.Printf("  checkpoint %d: %.1f MiB in the artifact store\n", last.ID, float64(last.Bytes)/(1<<20))

	// Recovery: a fresh run restores the checkpoint before it runs.
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	running := make(chan time.Time, 1)
	rt, err := kernel.Build("jobs[0]", p, kernel.Options{
		Registry: component.Default, StateRoot: root, Recovery: "latest_checkpoint",
		OnState: func(st kernel.State) {
			if st == kernel.Running || st == kernel.Completed {
				select {
				case running <- time.Now():
				default:
				}
			}
		},
	})
	if err != nil {
		return err
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := rt.Run(ctx); err != nil {
		return err
	}
	select {
	case t := <-running:
		fmt.Printf("  recovery (download + restore until running): %.2f s\n", t.Sub(t0).Seconds())
	default:
		return fmt.Errorf("the restored job never ran")
	}
	if o := rt.Observe(); o.RestoredFrom == "" {
		return fmt.Errorf("the job did not restore from a checkpoint")
	}
	return nil
}
