package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestHubCrashKeepsAcceptedJobs kills the Hub with SIGKILL while job
// creates and desired-state writes are being answered, right after a 202,
// and checks after a restart on the same file that every job whose create
// was answered 202 is there, with every accepted generation and its
// operation: a 202 means the intent is on disk.
func TestHubCrashKeepsAcceptedJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Hub child processes")
	}
	storage := filepath.Join(t.TempDir(), "hub.db")
	hub := startHub(t, storage)
	client := newHubClient(t, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type accepted struct {
		job        string
		generation int64
		operation  string
	}
	var (
		mu   sync.Mutex
		acks []accepted
		n    atomic.Int64
	)
	killAt := int64(60)
	killed := make(chan struct{})
	var once sync.Once
	parallel(8, func(w int) {
		for i := 0; i < 40; i++ {
			id := fmt.Sprintf("job-%d-%d", w, i)
			// The nodes never registered: the intents wait for them.
			body := fmt.Sprintf(`{"spec": %s, "desired_state": "stopped", "node_ids": ["ghost-%d"]}`, hubJobSpec(1, "/tmp/unused/out.jsonl", "file:///tmp/unused"), w%3)
			body = strings.Replace(body, `"id": "user-counts"`, `"id": "`+id+`"`, 1)
			r, err := hubDo(ctx, client, "POST", hub.base+"/api/v1/jobs", body)
			if err != nil || r.status != http.StatusAccepted {
				return // the Hub is gone
			}
			var d wire.JobDesiredResponse
			if json.Unmarshal(r.body, &d) != nil {
				t.Errorf("202 body %q", r.body)
				return
			}
			mu.Lock()
			acks = append(acks, accepted{job: id, generation: d.Generation, operation: d.OperationID})
			mu.Unlock()
			r, err = hubDo(ctx, client, "PUT", hub.base+"/api/v1/jobs/"+id+"/desired-state", `{"state": "running"}`)
			if err == nil && r.status == http.StatusAccepted && json.Unmarshal(r.body, &d) == nil {
				mu.Lock()
				acks = append(acks, accepted{job: id, generation: d.Generation, operation: d.OperationID})
				mu.Unlock()
			}
			if n.Add(1) == killAt {
				once.Do(func() {
					_ = hub.kill()
					close(killed)
				})
			}
		}
	})
	select {
	case <-killed:
	default:
		t.Fatalf("the Hub was not killed: only %d jobs written", n.Load())
	}
	hub = startHub(t, storage)
	if len(acks) < int(killAt) {
		t.Fatalf("only %d accepted writes before the kill", len(acks))
	}
	want := map[string]int64{}
	for _, a := range acks {
		want[a.job] = max(want[a.job], a.generation)
	}
	for job, gen := range want {
		var j wire.Job
		if status, err := hubGetJSON(ctx, client, hub.base+"/api/v1/jobs/"+job, &j); err != nil || status != http.StatusOK {
			t.Fatalf("accepted job %s lost: %d %v", job, status, err)
		}
		if j.Desired.Generation < gen {
			t.Fatalf("job %s: generation %d, accepted %d", job, j.Desired.Generation, gen)
		}
	}
	for _, a := range acks {
		var op wire.Operation
		if status, err := hubGetJSON(ctx, client, hub.base+"/api/v1/operations/"+a.operation, &op); err != nil || status != http.StatusOK {
			t.Fatalf("accepted operation %s of %s lost: %d %v", a.operation, a.job, status, err)
		}
	}
	t.Logf("%d accepted job writes of %d jobs, all present after SIGKILL", len(acks), len(want))
}
