package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// chattr runs chattr with args.
func chattr(args ...string) error {
	out, err := exec.Command("chattr", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chattr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// requireImmutable skips the test when files in dir cannot be made
// immutable: no chattr, a file system without the attribute, or a user
// without CAP_LINUX_IMMUTABLE.
func requireImmutable(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("chattr is not installed: cannot make the Hub's storage read-only under it")
	}
	probe := filepath.Join(dir, "probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := chattr("+i", probe)
	if err == nil {
		if err := chattr("-i", probe); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(probe)
		return
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "Operation not supported"), strings.Contains(msg, "Inappropriate ioctl"):
		t.Skipf("the file system of %s has no immutable attribute: %v", dir, err)
	case strings.Contains(msg, "Operation not permitted"):
		t.Skipf("making a file immutable needs CAP_LINUX_IMMUTABLE (root): %v", err)
	}
	t.Fatal(err)
}

// TestHubReadOnlyStorageUnderLoad makes the Hub's SQLite files immutable
// (chattr +i: writes through the open descriptors fail with EPERM) while
// 16 clients write desired state, and requires: mutations answer 503
// storage_unavailable and never 202 while the files are immutable,
// /readiness answers 503; after chattr -i, /readiness answers 200 again
// and writes are accepted again without a restart; every 202 is whole
// (verifyDurable) on the live Hub and after a restart, and PRAGMA
// quick_check is ok once the Hub stopped.
func TestHubReadOnlyStorageUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	requireImmutable(t, dir)
	path := filepath.Join(dir, "hub.db")
	hub := startHub(t, path)
	var files []string
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	// Registered after t.TempDir, so it runs before the directory's removal.
	t.Cleanup(func() { _ = chattr(append([]string{"-i"}, files...)...) })

	const (
		workers  = 16
		maxAcks  = 1500 // stays under the 2,048 retained events verifyDurable reads
		attempts = 5000 // per client
	)
	// Acknowledged writes to wait for before chattr +i and after chattr -i;
	// fewer under -race, where the Hub child is 5 to 10 times slower.
	preAcks, postAcks := int64(200), int64(100)
	if raceEnabled {
		preAcks, postAcks = 100, 50
	}
	client := newHubClient(t, workers)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a hang guard, not a timing assertion
	defer cancel()

	// phase: 0 writable, 1 freezing (set before chattr +i), 2 immutable
	// (set after chattr +i returned), 3 thawing (set before chattr -i).
	// A request sent and answered in one phase ran entirely in it.
	var (
		phase      atomic.Int32
		stop       = make(chan struct{})
		mu         sync.Mutex // guards the fields below
		acks       []ack
		loadErrs   []error
		frozen503  int // storage_unavailable answers to requests run entirely while immutable
		nAcked     atomic.Int64
		ackedAfter atomic.Int64 // 202s to requests sent after the thaw began
		resources  []resKey
	)
	fail := func(err error) {
		mu.Lock()
		loadErrs = append(loadErrs, err)
		mu.Unlock()
	}
	for w := range workers {
		resources = append(resources, resKey{fmt.Sprintf("node-%d", w%4), fmt.Sprintf("ro-w%d", w)})
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			res := resources[w]
			var lastGen int64
			for i := 0; i < attempts && nAcked.Load() < maxAcks; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"state":%q,"config_version":"v%d"}`, []string{"running", "stopped"}[i%2], i)
				sent := phase.Load()
				resp, err := hubDo(ctx, client, http.MethodPut, res.desiredURL(hub.base), body)
				answered := phase.Load()
				if err != nil {
					fail(fmt.Errorf("%s (phase %d): %w", res, sent, err))
					return
				}
				switch resp.status {
				case http.StatusAccepted:
					a, err := parseAccepted(resp, res, "", body)
					if err == nil && a.gen != lastGen+1 {
						err = fmt.Errorf("%s: 202 generation %d after %d", res, a.gen, lastGen)
					}
					lastGen = a.gen
					if err == nil && sent == 2 && answered == 2 {
						err = fmt.Errorf("%s: 202 (generation %d) while the storage was immutable", res, a.gen)
					}
					mu.Lock()
					acks = append(acks, a)
					if err != nil {
						loadErrs = append(loadErrs, err)
					}
					mu.Unlock()
					nAcked.Add(1)
					if sent == 3 {
						ackedAfter.Add(1)
					}
				case http.StatusServiceUnavailable:
					var p wire.Problem
					if err := json.Unmarshal(resp.body, &p); err != nil || p.Code != "storage_unavailable" {
						fail(fmt.Errorf("%s: 503 %s, want code storage_unavailable", res, resp.body))
						return
					}
					if sent == 0 && answered == 0 {
						fail(fmt.Errorf("%s: 503 storage_unavailable before the storage was made immutable", res))
						return
					}
					if sent == 2 && answered == 2 {
						mu.Lock()
						frozen503++
						mu.Unlock()
					}
					time.Sleep(2 * time.Millisecond) // no hot loop against a failing Hub
				default:
					fail(fmt.Errorf("%s (phase %d): status %d: %s", res, sent, resp.status, resp.body))
					return
				}
			}
		})
	}
	var stopOnce sync.Once
	stopLoad := func() {
		stopOnce.Do(func() {
			close(stop)
			wg.Wait()
			for _, err := range loadErrs {
				t.Error(err)
			}
		})
	}
	defer stopLoad()
	waitFor := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !cond() {
			if time.Now().After(deadline) {
				stopLoad()
				t.Fatalf("%s: not within %v", what, d)
			}
			mu.Lock()
			n := len(loadErrs)
			mu.Unlock()
			if n > 0 {
				stopLoad()
				t.FailNow()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	waitFor("writes accepted before chattr +i", 20*time.Second, func() bool { return nAcked.Load() >= preAcks })
	phase.Store(1)
	if err := chattr(append([]string{"+i"}, files...)...); err != nil {
		stopLoad()
		t.Fatal(err)
	}
	phase.Store(2)
	ackedBefore := nAcked.Load()
	waitFor("20 mutations answered 503 storage_unavailable while immutable", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return frozen503 >= 20
	})
	if !waitReadiness(hub.base, http.StatusServiceUnavailable, 10*time.Second) {
		stopLoad()
		t.Fatalf("/readiness did not answer 503 within 10 s while the storage refused writes")
	}
	if r, err := hubDo(ctx, client, http.MethodGet, hub.base+"/readiness", ""); err != nil {
		t.Error(err)
	} else {
		var probe struct{ Status, Reason string }
		err := json.Unmarshal(r.body, &probe)
		if err != nil || r.status != http.StatusServiceUnavailable || probe.Reason != "storage_unavailable" {
			t.Errorf("/readiness while immutable: status %d, %s (%v), want 503 with reason storage_unavailable", r.status, r.body, err)
		}
	}
	phase.Store(3)
	if err := chattr(append([]string{"-i"}, files...)...); err != nil {
		stopLoad()
		t.Fatal(err)
	}
	if !waitReadiness(hub.base, http.StatusOK, 15*time.Second) {
		stopLoad()
		t.Fatalf("/readiness did not answer 200 again within 15 s of chattr -i")
	}
	waitFor("writes accepted after chattr -i", 20*time.Second, func() bool { return ackedAfter.Load() >= postAcks })
	stopLoad()
	if t.Failed() {
		t.FailNow()
	}
	mu.Lock()
	t.Logf("%d writes accepted before chattr +i, %d answered 503 storage_unavailable while immutable, %d accepted after chattr -i (%d in all)",
		ackedBefore, frozen503, ackedAfter.Load(), len(acks))
	mu.Unlock()

	verifyDurable(ctx, t, client, hub, resources, acks)
	hub.stop(t)
	quickCheck(t, path)
	hub = startHub(t, path)
	verifyDurable(ctx, t, client, hub, resources, acks)
	hub.stop(t)
}
