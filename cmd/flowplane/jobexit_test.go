package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// exitJob is a job section: a count over generate into drop, count records
// (0: unbounded); agg is the aggregation.
func exitJob(id string, count int, agg string) string {
	return fmt.Sprintf(`
  - id: %s
    version: 1
    operators:
      - {id: src, kind: source}
      - {id: counts, kind: aggregate, config: {key: this.k, aggregations: [%s]}}
      - {id: out, kind: sink}
    edges: [{from: src, to: counts}, {from: counts, to: out}]
    sources: [{operator_id: src, input_type: generate, config: {context: '{"k": 1, "s": "x"}', interval: 2ms, count: %d}}]
    sinks: [{operator_id: out, output_type: drop}]
    state: {backend: embedded_kv, durability: ephemeral}
    recovery: fail
`, id, agg, count)
}

// exitCode waits (bounded) for cmd to exit and returns its exit code.
func exitCode(t *testing.T, cmd *exec.Cmd, within time.Duration) int {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("wait: %v", err)
		}
		return cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("the node did not exit within %v", within)
		return -1
	}
}

// postOp posts a bodiless action, as curl -X POST sends it (no
// Content-Type), and waits (bounded) for its operation to succeed.
func postOp(t *testing.T, url string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var op struct {
		OperationID string `json:"operation_id"`
	}
	err = json.NewDecoder(res.Body).Decode(&op)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("POST %s: %d %v", url, res.StatusCode, err)
	}
	base, _, _ := strings.Cut(url, "/jobs/")
	waitUntil(t, "POST "+url+" succeeded", func() bool {
		var o struct{ State string }
		getJSON(t, base+"/operations/"+op.OperationID, &o)
		if o.State == "failed" || o.State == "cancelled" {
			t.Fatalf("POST %s: operation %s", url, o.State)
		}
		return o.State == "succeeded"
	})
}

// TestNodeWithJobsExitRule is the rule of README "Command line" and
// docs/decisions.md: a standalone node exits once every stream and job
// ended by itself, 0 when all completed and 1 when one failed; a job
// stopped on request did not end by itself and keeps the node up until it
// is signalled.
func TestNodeWithJobsExitRule(t *testing.T) {
	count := `{name: n, function: count}`
	sumOfString := `{name: total, function: sum, expression: this.s}`
	for _, c := range []struct {
		name, jobs string
		want       int
	}{
		{"every job completed", exitJob("a", 200, count) + exitJob("b", 100, count), 0},
		{"a job failed", exitJob("a", 100, count) + exitJob("bad", 100, sumOfString), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			conf := filepath.Join(dir, "node.yaml")
			text := fmt.Sprintf("logging: {level: error}\nhealth_check: {enabled: true, address: 127.0.0.1:%d}\nstreams: []\njobs:%s", freePort(t), c.jobs)
			if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := exitCode(t, startChild(t, conf, filepath.Join(dir, "state")), time.Minute); got != c.want {
				t.Errorf("exit code %d, want %d", got, c.want)
			}
		})
	}

	t.Run("a job stopped on request keeps the node up", func(t *testing.T) {
		dir := t.TempDir()
		conf := filepath.Join(dir, "node.yaml")
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		text := "logging: {level: error}\nhealth_check: {enabled: true, address: " + addr + "}\nstreams: []\njobs:" +
			exitJob("finite", 100, count) + exitJob("forever", 0, count)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := startChild(t, conf, filepath.Join(dir, "state"))
		base := "http://" + addr
		waitListening(t, addr)
		state := func(id string) string {
			var v struct{ State string }
			getJSON(t, base+"/jobs/"+id, &v)
			return v.State
		}
		waitUntil(t, "the finite job completed", func() bool { return state("finite") == "completed" })
		waitUntil(t, "the unbounded job running", func() bool { return state("forever") == "running" })
		postOp(t, base+"/jobs/forever/stop")
		// Every job has ended now, one of them on request: the node
		// serves on, healthy.
		if got := state("forever"); got != "stopped" {
			t.Errorf("the stopped job reads %s", got)
		}
		var health struct{ Status string }
		getJSON(t, base+"/health", &health)
		if health.Status != "healthy" {
			t.Errorf("health %q", health.Status)
		}
		// Still up, it takes the job back: a node that had exited would
		// refuse the connection.
		postOp(t, base+"/jobs/forever/start")
		waitUntil(t, "the job running again", func() bool { return state("forever") == "running" })
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if got := exitCode(t, cmd, 30*time.Second); got != 0 {
			t.Errorf("exit code after SIGTERM %d, want 0", got)
		}
	})
}
