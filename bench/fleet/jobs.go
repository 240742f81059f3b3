package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// runJobs is the jobs mode (make bench-fleet-jobs): it creates o.jobs jobs,
// running, placed by the Hub, with o.concurrency creates in flight, and
// measures each from just before its POST until the SSE stream delivers
// the convergence_changed event that reports it in_sync; then it triggers
// o.checkpoints checkpoints across the jobs and measures each from just
// before its POST until the SSE stream delivers its checkpoint_completed
// event.
func runJobs(ctx context.Context, o options, h *hubClient, w *watcher, dir string) error {
	store := "file://" + filepath.Join(dir, "checkpoints")
	type placed struct{ id, node string }
	var (
		mu      sync.Mutex
		lat     []time.Duration
		jobs    []placed
		failed  []error
		wg      sync.WaitGroup
		next    = make(chan int, o.jobs)
		began   = time.Now()
		workers = o.concurrency
	)
	for i := range o.jobs {
		next <- i
	}
	close(next)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() != nil {
					return
				}
				id := fmt.Sprintf("job-%d", i)
				start := time.Now()
				var r wire.JobDesiredResponse
				err := h.do("POST", "/jobs", `{"desired_state": "running", "spec": `+benchJobSpec(id, store)+`}`, &r)
				var at time.Time
				if err == nil {
					at, err = w.wait(ctx, key{r.NodeID, id, r.Generation}, start.Add(o.timeout))
				}
				mu.Lock()
				if err != nil {
					failed = append(failed, fmt.Errorf("%s: %w", id, err))
				} else {
					lat = append(lat, at.Sub(start))
					jobs = append(jobs, placed{id, r.NodeID})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	fmt.Printf("flowplane jobs benchmark: %d jobs created running over %d Agents, %d creates in flight, %.0f jobs/s\n",
		o.jobs, o.nodes, o.concurrency, float64(len(lat))/elapsed.Seconds())
	printLatency("create-to-in_sync", lat, len(failed))
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d jobs did not reach in_sync (first: %v); logs in %s", len(failed), o.jobs, failed[0], dir)
	}

	// Checkpoints, one job at a time per worker, round robin over the jobs.
	lat, failed = nil, nil
	next = make(chan int, o.checkpoints)
	for i := range o.checkpoints {
		next <- i
	}
	close(next)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() != nil {
					return
				}
				j := jobs[i%len(jobs)]
				start := time.Now()
				var r wire.JobCommandResponse
				err := h.do("POST", "/jobs/"+j.id+"/checkpoints", "", &r)
				var at time.Time
				if err == nil {
					at, err = w.waitOp(ctx, r.OperationID, wire.EventCheckpointCompleted, start.Add(o.timeout))
				}
				mu.Lock()
				if err != nil {
					failed = append(failed, fmt.Errorf("%s checkpoint: %w", j.id, err))
				} else {
					lat = append(lat, at.Sub(start))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	printLatency("checkpoint-to-checkpoint_completed", lat, len(failed))
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d checkpoints did not complete (first: %v); logs in %s", len(failed), o.checkpoints, failed[0], dir)
	}
	return nil
}

// benchJobSpec is a small job: generated events, a keyed running count
// (state the checkpoint carries), dropped output. Periodic checkpoints are
// an hour apart: only triggered ones are measured.
func benchJobSpec(id, store string) string {
	return fmt.Sprintf(`{"id": %q, "version": 1,
  "operators": [{"id": "src", "kind": "source"},
    {"id": "counts", "kind": "aggregate", "config": {"key": "this.k", "aggregations": [{"name": "n", "function": "count"}]}},
    {"id": "out", "kind": "sink"}],
  "edges": [{"from": "src", "to": "counts", "partitioned": true}, {"from": "counts", "to": "out"}],
  "sources": [{"operator_id": "src", "input_type": "generate", "config": {"context": "{\"k\": \"k{{random:16}}\"}", "interval": "100ms"}}],
  "sinks": [{"operator_id": "out", "output_type": "drop"}],
  "state": {"backend": "embedded_kv"},
  "checkpoint": {"interval_ms": 3600000, "retention": 2, "object_store_uri": %q}}`, id, store)
}

func printLatency(what string, lat []time.Duration, failed int) {
	slices.Sort(lat)
	pct := func(p float64) string {
		if len(lat) == 0 {
			return "-"
		}
		return ms(lat[min(int(float64(len(lat))*p), len(lat)-1)])
	}
	fmt.Printf("%s  p50 %s  p90 %s  p99 %s  max %s  (%d measured, %d failed)\n",
		what, pct(0.50), pct(0.90), pct(0.99), pct(1), len(lat), failed)
}

// waitOp returns when the event kind of operation op arrived.
func (w *watcher) waitOp(ctx context.Context, op, kind string, deadline time.Time) (time.Time, error) {
	w.mu.Lock()
	if at, ok := w.byOp[op][kind]; ok {
		w.mu.Unlock()
		return at, nil
	}
	if w.err != nil {
		w.mu.Unlock()
		return time.Time{}, w.err
	}
	c := make(chan time.Time, 1)
	w.opWait[[2]string{op, kind}] = c
	w.mu.Unlock()
	return w.await(ctx, c, deadline, func() { delete(w.opWait, [2]string{op, kind}) }, fmt.Errorf("no %s event", kind))
}
