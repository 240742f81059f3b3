package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// jobRun is one measured job.
type jobRun struct {
	name, placement string
	nodes           []string // the candidates (node_ids)
	events, users   int
	parallelism     int
	ckpt            time.Duration
}

// result is what a run measured.
type result struct {
	run        jobRun
	placed     map[string]int // node -> tasks
	wall       time.Duration
	cpu        float64 // seconds, every node process
	sent       float64 // data-plane bytes sent, every node
	haveBytes  bool
	ckpts      []int64 // checkpoint durations seen, ms
	completed  int     // checkpoint_completed events of the job at the Hub
	lastCkptMS float64 // svc_job_checkpoint_duration_ms of the coordinator at the end
}

// spec is the job: generate at full speed -> keyed tumbling window ->
// drop, as bench/jobs/window.yaml.
func (r jobRun) spec(id, store string) string {
	spec := map[string]any{
		"id": id, "version": 1, "parallelism": r.parallelism,
		"operators": []any{
			map[string]any{"id": "clicks", "kind": "source"},
			map[string]any{"id": "per-user", "kind": "window", "config": map[string]any{
				"key":          "this.user",
				"window":       map[string]any{"type": "tumbling", "size_ms": 1000},
				"aggregations": []any{map[string]any{"name": "clicks", "function": "count"}},
			}},
			map[string]any{"id": "out", "kind": "sink"},
		},
		"edges": []any{
			map[string]any{"from": "clicks", "to": "per-user", "partitioned": true},
			map[string]any{"from": "per-user", "to": "out"},
		},
		"sources": []any{map[string]any{"operator_id": "clicks", "input_type": "generate",
			"config": map[string]any{
				"context":            fmt.Sprintf(`{"user":"u{{random:%d}}","ts":{{timestamp_ms}}}`, r.users),
				"seed":               1,
				"timestamp_start_ms": 1767225600000,
				"timestamp_step_ms":  0.001,
				"count":              r.events,
				"interval":           "0s",
				"batch_size":         1024,
			},
			"time": map[string]any{"mode": "event_time", "timestamp_field": "ts"}}},
		"sinks":      []any{map[string]any{"operator_id": "out", "output_type": "drop", "config": map[string]any{}}},
		"state":      map[string]any{"backend": "embedded_kv"},
		"checkpoint": map[string]any{"interval_ms": r.ckpt.Milliseconds(), "retention": 2, "object_store_uri": store},
	}
	b, _ := json.Marshal(spec)
	return string(b)
}

// run creates the job, waits for it to complete and measures it.
func (c *cluster) run(ctx context.Context, r jobRun, timeout time.Duration) (result, error) {
	res := result{run: r, placed: map[string]int{}}
	id := fmt.Sprintf("bench-%s-%d", r.name, time.Now().UnixMilli())
	cpu0, err := c.cpu()
	if err != nil {
		return res, err
	}
	nodes, _ := json.Marshal(r.nodes)
	body := fmt.Sprintf(`{"spec": %s, "desired_state": "running", "node_ids": %s, "placement": %q}`, r.spec(id, c.store), nodes, r.placement)
	began := time.Now()
	var created wire.JobDesiredResponse
	if err := c.hub.do(http.MethodPost, "/jobs", body, &created); err != nil {
		return res, err
	}
	var d wire.JobDetail
	var lastMS float64
	deadline := began.Add(timeout)
	for {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("job %s not completed within %v (observed %q, last error %q); logs in %s", id, timeout, d.Observed.State, d.Observed.LastError, c.dir)
		}
		d = wire.JobDetail{}
		if err := c.hub.do(http.MethodGet, "/jobs/"+id+"/detail", "", &d); err == nil {
			// The coordinator's gauge changes with every checkpoint it
			// completes; the Agent reports it to the Hub less often.
			if ms, ok := c.checkpointMS(d.Placement.NodeID, id); ok && ms > 0 && ms != lastMS {
				lastMS = ms
				res.ckpts = append(res.ckpts, int64(ms))
			}
			// A job's data-plane series go when its run ends: keep the
			// largest total seen while it runs (the last poll interval's
			// bytes may be missed).
			if sent := c.sentBytes(id); sent > res.sent {
				res.sent, res.haveBytes = sent, true
			}
			if d.Observed.State == wire.JobCompleted {
				break
			}
			if d.Observed.State == "failed" {
				return res, fmt.Errorf("job %s failed: %s", id, d.Observed.LastError)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	res.wall = time.Since(began)
	cpu1, err := c.cpu()
	if err != nil {
		return res, err
	}
	res.cpu = cpu1 - cpu0
	var generated int64
	for _, t := range d.Assignment {
		res.placed[t.NodeID]++
		if slices.Equal(t.Operators, []string{"clicks"}) {
			generated += t.RecordsOut
		}
	}
	if generated != int64(r.events) {
		return res, fmt.Errorf("job %s completed with %d events generated, want %d", id, generated, r.events)
	}
	if r.placement == wire.PlacementSplit && (d.Placement.Mode != wire.PlacementSplit || len(res.placed) != len(r.nodes)) {
		return res, fmt.Errorf("job %s was not placed split over %v: placement %+v (a Hub without split placement?)", id, r.nodes, d.Placement)
	}
	res.lastCkptMS, _ = c.checkpointMS(d.Placement.NodeID, id)
	var evs wire.Page[wire.Event]
	if err := c.hub.do(http.MethodGet, "/events?page_size=100&resource_id="+id, "", &evs); err == nil {
		for _, e := range evs.Items {
			if e.Kind == wire.EventCheckpointCompleted {
				res.completed++
			}
		}
	}
	return res, nil
}

// checkpointMS reads svc_job_checkpoint_duration_ms of job on node.
func (c *cluster) checkpointMS(node, job string) (float64, bool) {
	h := c.lab.Host(node)
	if h == nil {
		return 0, false
	}
	text, err := metrics(h)
	if err != nil {
		return 0, false
	}
	for _, s := range samples(text, "svc_job_checkpoint_duration_ms") {
		if s.labels["job"] == job {
			return s.value, true
		}
	}
	return 0, false
}

// cpu is the CPU time of every node process, in seconds.
func (c *cluster) cpu() (float64, error) {
	var sum float64
	for _, p := range c.nodes {
		s, err := cpuSeconds(p.Process.Pid)
		if err != nil {
			return 0, err
		}
		sum += s
	}
	return sum, nil
}

// sentBytes is what every node sent over the data plane for job so far.
func (c *cluster) sentBytes(job string) float64 {
	var sum float64
	for id := range c.nodes {
		if text, err := metrics(c.lab.Host(id)); err == nil {
			sum += sentBytes(text, job)
		}
	}
	return sum
}

// printHeader prints the table's header; printRow one run's line.
func printHeader() {
	fmt.Printf("%-11s %-16s %9s %12s %14s %8s %10s %11s\n", "run", "tasks per node", "wall", "events/s", "data plane", "MB/s", "node CPU", "CPU/event")
}

func printRow(r result) {
	var placed []string
	for _, n := range slices.Sorted(maps.Keys(r.placed)) {
		placed = append(placed, fmt.Sprintf("%s:%d", n, r.placed[n]))
	}
	dp, rate := "n/a", "n/a"
	if r.haveBytes {
		dp = fmt.Sprintf("%.1f MiB", r.sent/(1<<20))
		rate = fmt.Sprintf("%.1f", r.sent/1e6/r.wall.Seconds())
	}
	fmt.Printf("%-11s %-16s %8.2fs %12.0f %14s %8s %9.2fs %9.2fµs\n", r.run.name, strings.Join(placed, ","), r.wall.Seconds(),
		float64(r.run.events)/r.wall.Seconds(), dp, rate, r.cpu, r.cpu/float64(r.run.events)*1e6)
}

// printCheckpoints prints the checkpoint durations a run saw.
func printCheckpoints(r result) {
	fmt.Printf("\ncheckpoints across %d nodes, every %v: %d completed (Hub events); durations barrier to manifest (the coordinator's svc_job_checkpoint_duration_ms, sampled every 50 ms): ",
		len(r.placed), r.run.ckpt, r.completed)
	if len(r.ckpts) == 0 {
		fmt.Printf("none seen (a run shorter than the interval?)\n")
		return
	}
	s := slices.Sorted(slices.Values(r.ckpts))
	fmt.Printf("%d seen, min %d ms, p50 %d ms, max %d ms; last %.0f ms\n", len(s), s[0], s[len(s)/2], s[len(s)-1], r.lastCkptMS)
}

// printNotes says what the columns measure.
func printNotes() {
	fmt.Println("\nwall: from the create request to the Hub showing the job completed (includes dispatch and the Agent's report).")
	fmt.Println("node CPU: utime+stime of the three node processes over the run; data plane: svc_dataplane_bytes_total sent, summed over the nodes.")
}
