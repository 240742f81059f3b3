package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// burstGap is a silence between two 202s that marks a new commit's burst
// of answers (a commit's answers leave together; the Hub commits every few
// milliseconds under this load).
const burstGap = time.Millisecond

// crashShape is the load of one crash round: workers clients, each owning
// resPerWorker resources and writing them in turn, writesPerRes times,
// one request at a time; the kill comes after a random number of 202s in
// [killMin, killMax] (killFirstMin in the first round).
type crashShape struct {
	rounds, workers, resPerWorker, writesPerRes int
	killFirstMin, killMin, killMax              int
}

// crashLoad: three rounds of up to 1,920 writes over 192 resources. Under
// -race the Hub child (the same binary) is 5 to 10 times slower: one round
// of up to 512 writes over 64 resources.
var crashLoad = crashShape{rounds: 3, workers: 64, resPerWorker: 3, writesPerRes: 10, killFirstMin: 1000, killMin: 100, killMax: 1700}

func init() {
	if raceEnabled {
		crashLoad = crashShape{rounds: 1, workers: 32, resPerWorker: 2, writesPerRes: 8, killFirstMin: 200, killMin: 200, killMax: 400}
	}
}

// TestHubCrashKeepsAcceptedIntents is invariant 1 with the Hub as a real
// process. In each round (see crashLoad: three rounds of up to 1,920
// writes) 64 clients fire desired-state writes over 192 fresh resources,
// the Hub is SIGKILLed once a random number of them were answered 202
// (1,000 to 1,700 in the first round, 100 to 1,700 after), and the Hub
// restarted on the same file must hold every acknowledged write whole (see
// verifyDurable). At the end every write that carried an Idempotency-Key
// is retried: it must replay its 202 and change nothing.
//
// A Hub that answers 202 before its transaction reached the kernel fails
// this test when a kill lands in that gap. Acknowledging each write as soon
// as it ran inside the group transaction failed 10 runs out of 10;
// acknowledging a whole batch just before its COMMIT (a gap of the commit's
// WAL writes, ~0.2 ms) was caught by about one kill in four, so there are
// three rounds. A SIGKILL cannot show a missing fsync (the page cache
// survives it); Open refuses a database without synchronous=FULL.
func TestHubCrashKeepsAcceptedIntents(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	path := filepath.Join(t.TempDir(), "hub.db")
	sh := crashLoad
	client := newHubClient(t, sh.workers)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a hang guard, not a timing assertion
	defer cancel()

	hub := startHub(t, path)
	var (
		acks      []ack
		resources = map[resKey]bool{}
	)
	for round := range sh.rounds {
		lo := sh.killMin
		if round == 0 {
			lo = sh.killFirstMin
		}
		killAt := lo + rand.IntN(sh.killMax+1-lo)
		ra, rres := crashRound(ctx, t, hub, client, sh, round, killAt)
		hub = startHub(t, path)
		verifyDurable(ctx, t, client, hub, rres, ra)
		if t.Failed() {
			t.FailNow()
		}
		acks = append(acks, ra...)
		for _, r := range rres {
			resources[r] = true
		}
	}

	// An acknowledged write's Idempotency-Key outlives the crashes: the
	// retry replays the first answer and stores nothing.
	all := sortedKeys(resources)
	before := generations(ctx, t, client, hub.base, all)
	var replayed atomic.Int64
	parallel(len(acks), func(i int) {
		a := acks[i]
		if a.key == "" {
			return
		}
		resp, err := hubDo(ctx, client, http.MethodPut, a.res.desiredURL(hub.base), a.body, "Idempotency-Key", a.key)
		switch {
		case err != nil:
			t.Errorf("retry of %s: %v", a.op, err)
		case resp.status != http.StatusAccepted || resp.header.Get("Idempotent-Replayed") != "true":
			t.Errorf("retry of acknowledged %s (key %s) after restart: status %d, replayed %q: %s",
				a.op, a.key, resp.status, resp.header.Get("Idempotent-Replayed"), resp.body)
		default:
			if r, err := parseAccepted(resp, a.res, a.key, a.body); err != nil || r.op != a.op || r.gen != a.gen {
				t.Errorf("retry of %s generation %d replayed %s generation %d (%v)", a.op, a.gen, r.op, r.gen, err)
			}
			replayed.Add(1)
		}
	})
	after := generations(ctx, t, client, hub.base, all)
	if diff := cmp.Diff(before, after, cmp.AllowUnexported(resKey{})); diff != "" {
		t.Errorf("idempotent retries changed generations (-before +after):\n%s", diff)
	}
	t.Logf("%d idempotent retries replayed", replayed.Load())
	hub.stop(t)
	quickCheck(t, path)
}

// crashRound runs one round's load of shape sh against hub and SIGKILLs
// it from a client past the killAt-th 202. It returns the acknowledged
// writes and every resource written to.
func crashRound(ctx context.Context, t *testing.T, hub *hubProc, client *http.Client, sh crashShape, round, killAt int) ([]ack, []resKey) {
	t.Helper()
	resource := func(w, r int) resKey {
		return resKey{fmt.Sprintf("node-%d", w%8), fmt.Sprintf("r%d-w%d-s%d", round, w, r)}
	}
	var (
		mu        sync.Mutex // guards acks and loadErrs
		acks      []ack
		loadErrs  []error
		nAcked    atomic.Int64
		nSent     atomic.Int64
		killing   atomic.Bool // set before the signal: errors from then on are the kill's
		killOnce  sync.Once
		start     = time.Now()
		lastAckAt atomic.Int64 // nanoseconds since start
	)
	fail := func(err error) {
		mu.Lock()
		loadErrs = append(loadErrs, err)
		mu.Unlock()
	}
	kill := func() {
		killOnce.Do(func() {
			killing.Store(true)
			if err := hub.kill(); err != nil {
				fail(err)
			}
		})
	}
	var wg sync.WaitGroup
	for w := range sh.workers {
		wg.Go(func() {
			lastGen := map[resKey]int64{}
			for i := range sh.writesPerRes {
				for r := range sh.resPerWorker {
					if killing.Load() {
						return
					}
					res := resource(w, r)
					body := fmt.Sprintf(`{"state":%q,"config_version":"v%d"}`, []string{"running", "stopped"}[i%2], i)
					var hdr []string
					key := ""
					if (w+i+r)%2 == 0 {
						key = fmt.Sprintf("crash-%s-%d", res, i)
						hdr = []string{"Idempotency-Key", key}
					}
					nSent.Add(1)
					resp, err := hubDo(ctx, client, http.MethodPut, res.desiredURL(hub.base), body, hdr...)
					if err != nil {
						if !killing.Load() { // else the answer died with the Hub
							fail(fmt.Errorf("%s before the kill: %w", res, err))
						}
						return
					}
					if resp.status != http.StatusAccepted {
						fail(fmt.Errorf("%s: status %d: %s", res, resp.status, resp.body))
						return
					}
					// Past the target, kill at the first 202 of a group
					// commit's burst: the moment after an early
					// acknowledgement and before its commit is widest there.
					now := time.Since(start)
					quiet := now - time.Duration(lastAckAt.Swap(int64(now)))
					if nAcked.Add(1) >= int64(killAt) && (quiet >= burstGap || nAcked.Load() >= int64(killAt)+100) {
						kill()
					}
					a, err := parseAccepted(resp, res, key, body)
					if err == nil && a.gen != lastGen[res]+1 {
						err = fmt.Errorf("%s: 202 generation %d after %d from the same client", res, a.gen, lastGen[res])
					}
					lastGen[res] = a.gen
					mu.Lock()
					acks = append(acks, a) // kept even when malformed: it was acknowledged
					if err != nil {
						loadErrs = append(loadErrs, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if !killing.Load() {
		kill()
		t.Fatalf("round %d: the load ended after %d of %d acknowledgements, before the kill target %d",
			round, nAcked.Load(), sh.workers*sh.resPerWorker*sh.writesPerRes, killAt)
	}
	for _, err := range loadErrs {
		t.Errorf("round %d: %v", round, err)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("round %d: SIGKILL at the 202 number %d; %d acknowledged, %d sent", round, killAt, len(acks), nSent.Load())
	var resources []resKey
	for w := range sh.workers {
		for r := range sh.resPerWorker {
			resources = append(resources, resource(w, r))
		}
	}
	return acks, resources
}
