// Command hubwrites measures durable desired-state writes per second
// through the Hub's HTTP API, with their latency, next to the machine's raw
// fsync rate measured in the same run and directory.
//
// It first writes 4 KiB + fdatasync in a loop on a file in the storage
// directory, then starts a Hub on 127.0.0.1 with its SQLite file in that
// directory, or with -storage postgres on the empty PostgreSQL database of
// -pg (the binary given by -bin as a child process, or in this
// process without -bin), warms it up, and runs -c clients, each sending
// PUT desired-state requests one at a time over its own resources, for -d
// or -max requests, whichever ends first. Every answer must be 202; a 202
// means the intent's transaction is on disk.
//
// Usage (see bench/README.md):
//
//	go build -o bench/results/flowplane ./cmd/flowplane
//	go run ./bench/hubwrites -bin bench/results/flowplane
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flowplane/flowplane/bench/internal/proc"
	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/hub"
)

const token = "bench-operator-token"

// principal is who the clients write as: the bootstrap token, or with
// -named the last of that many named tokens (the lookup compares them all).
var principal struct {
	named  int
	token  string // the bearer token clients send
	tokens string // the tokens file; "" without -named
}

// namedTokens writes a tokens file of n operator tokens into dir and makes
// the last one the clients' token.
func namedTokens(dir string, n int) error {
	principal.token = token
	if n <= 0 {
		return nil
	}
	var b strings.Builder
	for i := range n {
		tok, sum, err := access.NewToken()
		if err != nil {
			return err
		}
		b.WriteString(access.NamedToken{Name: fmt.Sprintf("bench-%d", i), Role: access.Operator, SHA256: sum}.Line() + "\n")
		principal.token = tok
	}
	principal.tokens = filepath.Join(dir, "tokens")
	return os.WriteFile(principal.tokens, []byte(b.String()), 0o600)
}

func main() {
	var (
		bin        = flag.String("bin", "", "flowplane binary to run as the Hub (default: a Hub inside this process)")
		conc       = flag.Int("c", 32, "concurrent clients, one request in flight each")
		dur        = flag.Duration("d", 10*time.Second, "measured duration")
		warm       = flag.Duration("warmup", time.Second, "unmeasured warm-up at the same concurrency")
		maxReq     = flag.Int("max", 1_000_000, "upper bound on measured requests")
		nres       = flag.Int("resources", 1024, "distinct (node, stream) resources, split among the clients")
		nodes      = flag.Int("nodes", 16, "nodes the resources are spread over (the Hub re-evaluates a node's resources after each write to it)")
		idem       = flag.Bool("idempotency", false, "send an Idempotency-Key with every write")
		fsyncDur   = flag.Duration("fsync", 2*time.Second, "duration of the raw fsync measurement")
		dir        = flag.String("dir", "", "directory for the SQLite file and the fsync file (default: a new temporary directory, removed at exit)")
		cpuprofile = flag.String("cpuprofile", "", "write a CPU profile of the measured phase (in-process Hub only)")
		backend    = flag.String("storage", "sqlite", "the Hub's storage: sqlite (a file in -dir) or postgres (the database of -pg)")
		pgURL      = flag.String("pg", "", "with -storage postgres: the URL of an empty PostgreSQL database (postgres://...)")
		hubs       = flag.Int("hubs", 1, "with -storage postgres and -bin: Hub processes on the one database, the clients spread over them")
		named      = flag.Int("named", 0, "write as the last of this many named operator tokens (SVC_HUB_TOKENS_FILE) instead of the bootstrap token: the cost of a token lookup per request")
	)
	flag.Parse()
	principal.named = *named
	switch {
	case *backend == "sqlite" && *pgURL == "":
		storagePG = ""
	case *backend == "postgres" && (strings.HasPrefix(*pgURL, "postgres://") || strings.HasPrefix(*pgURL, "postgresql://")):
		storagePG = *pgURL
	default:
		fmt.Fprintln(os.Stderr, "hubwrites: want -storage sqlite, or -storage postgres with -pg postgres://...")
		os.Exit(2)
	}
	if *hubs < 1 || (*hubs > 1 && (storagePG == "" || *bin == "")) {
		fmt.Fprintln(os.Stderr, "hubwrites: -hubs above 1 needs -storage postgres and -bin")
		os.Exit(2)
	}
	if err := run(*bin, *hubs, *conc, *dur, *warm, *maxReq, *nres, *nodes, *idem, *fsyncDur, *dir, *cpuprofile); err != nil {
		fmt.Fprintln(os.Stderr, "hubwrites:", err)
		os.Exit(1)
	}
}

func run(bin string, hubs, conc int, dur, warm time.Duration, maxReq, nres, nodes int, idem bool, fsyncDur time.Duration, dir, cpuprofile string) error {
	if conc < 1 || nres < conc || maxReq < 1 || nodes < 1 {
		return errors.New("need -c >= 1, -resources >= -c, -max >= 1 and -nodes >= 1")
	}
	if cpuprofile != "" && bin != "" {
		return errors.New("-cpuprofile profiles an in-process Hub: drop -bin")
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "hubwrites-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if err := namedTokens(dir, principal.named); err != nil {
		return err
	}
	fsyncs, err := fsyncRate(filepath.Join(dir, "fsync.probe"), fsyncDur)
	if err != nil {
		return fmt.Errorf("fsync measurement: %w", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	storage := filepath.Join(dir, "hub.db")
	if storagePG != "" {
		storage = storagePG
	}
	var bases []string
	var stops []func() error
	pids := []int{os.Getpid()}
	if bin != "" {
		pids = pids[:0]
		for range hubs {
			base, pid, stop, err := startChild(ctx, bin, storage)
			if err != nil {
				return err
			}
			defer func() { _ = stop() }()
			bases, pids, stops = append(bases, base), append(pids, pid), append(stops, stop)
		}
	} else {
		base, stop, err := startInProcess(ctx, storage)
		if err != nil {
			return err
		}
		defer func() { _ = stop() }()
		bases, stops = append(bases, base), append(stops, stop)
	}
	cpuAll := func() (sum time.Duration) {
		for _, pid := range pids {
			sum += cpuTime(pid)
		}
		return sum
	}

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 2 * conc, MaxIdleConnsPerHost: 2 * conc, IdleConnTimeout: time.Minute,
	}}
	if _, err := load(ctx, client, bases, conc, warm, maxReq, nres, nodes, idem, "w"); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	cpu0 := cpuAll()
	res, err := load(ctx, client, bases, conc, dur, maxReq, nres, nodes, idem, "m")
	cpu := cpuAll() - cpu0
	if cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	for _, stop := range stops {
		if err := stop(); err != nil {
			return fmt.Errorf("stopping the Hub: %w", err)
		}
	}
	rate := float64(res.n) / res.elapsed.Seconds()
	mode, cpuOf := "in-process Hub", "Hub and clients"
	if bin != "" {
		mode, cpuOf = "Hub child process", "Hub process"
		if hubs > 1 {
			mode, cpuOf = fmt.Sprintf("%d Hub child processes on one database", hubs), "Hub processes"
		}
	}
	key := ""
	if idem {
		key = ", Idempotency-Key on every write"
	}
	backend := "SQLite"
	if storagePG != "" {
		backend = "PostgreSQL" // the raw fsync line is of -dir's disk, not the server's
	}
	fmt.Printf("hub durable writes (%s, %s, %d clients, %d resources on %d nodes%s, %d cores, %s)\n",
		mode, backend, conc, nres, nodes, key, runtime.NumCPU(), runtime.Version())
	fmt.Printf("  writes      %d in %.2f s = %.0f writes/s\n", res.n, res.elapsed.Seconds(), rate)
	fmt.Printf("  latency     p50 %.2f ms   p99 %.2f ms   max %.2f ms\n", ms(res.pct(0.50)), ms(res.pct(0.99)), ms(res.pct(1)))
	if cpu > 0 {
		fmt.Printf("  cpu         %.0f µs per write (%s; %.2f of %d cores)\n",
			float64(cpu.Microseconds())/float64(res.n), cpuOf, cpu.Seconds()/res.elapsed.Seconds(), runtime.NumCPU())
	}
	fmt.Printf("  raw fsync   %.0f fsyncs/s (4 KiB write + fdatasync, sequential, same directory)\n", fsyncs)
	fmt.Printf("  ratio       %.2f writes per fsync\n", rate/fsyncs)
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fsyncRate writes 4 KiB and fdatasyncs it in a loop for d (at most
// 1,000,000 times) and returns the rate.
func fsyncRate(path string, d time.Duration) (float64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i)
	}
	start := time.Now()
	n := 0
	for ; n < 1_000_000 && time.Since(start) < d; n++ {
		if _, err := f.WriteAt(buf, int64(n%256)*4096); err != nil {
			return 0, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// result is one load phase: requests answered 202 and their latencies.
type result struct {
	n       int
	elapsed time.Duration
	lat     []time.Duration // sorted
}

func (r result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	i := int(p*float64(len(r.lat))+0.5) - 1
	return r.lat[min(max(i, 0), len(r.lat)-1)]
}

// load runs conc clients against bases for d or maxReq requests, client w
// against bases[w mod len(bases)]. Client w
// writes the resources w, w+conc, w+2*conc, ... in turn; resource r is
// stream s-r of node-(r mod nodes). Any answer other than 202 ends the run
// with an error.
func load(ctx context.Context, c *http.Client, bases []string, conc int, d time.Duration, maxReq, nres, nodes int, idem bool, tag string) (result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
		lats     = make([][]time.Duration, conc)
		deadline = time.Now().Add(d)
	)
	start := time.Now()
	for w := range conc {
		wg.Go(func() {
			base := bases[w%len(bases)]
			var own []int
			for r := w; r < nres; r += conc {
				own = append(own, r)
			}
			for i := 0; ; i++ {
				if next.Add(1) > int64(maxReq) || time.Now().After(deadline) || ctx.Err() != nil {
					return
				}
				r := own[i%len(own)]
				u := fmt.Sprintf("%s/api/v1/nodes/node-%d/streams/s-%d/desired-state", base, r%nodes, r)
				body := fmt.Sprintf(`{"state":%q,"config_version":"v%d"}`, []string{"running", "stopped"}[i%2], i)
				req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, strings.NewReader(body))
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				req.Header.Set("Authorization", "Bearer "+principal.token)
				req.Header.Set("Content-Type", "application/json")
				if idem {
					req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d-%d", tag, w, i))
				}
				t0 := time.Now()
				resp, err := c.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusAccepted {
						err = fmt.Errorf("PUT %s: status %d", u, resp.StatusCode)
					}
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return result{}, firstErr
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	return result{n: len(all), elapsed: elapsed, lat: all}, nil
}

// storagePG is the -pg URL with -storage postgres, else "".
var storagePG string

func hubEnv(storage string) []string {
	return []string{"SVC_HUB_ADDRESS=127.0.0.1:0", "SVC_HUB_STORAGE=" + storage,
		"SVC_OPERATOR_TOKEN=" + token, "SVC_NODE_TOKEN=bench-node-token", "SVC_HUB_INSECURE_LOCAL=", "SVC_HUB_TOKENS_FILE=" + principal.tokens}
}

var listeningRE = regexp.MustCompile(`msg="hub: listening" address=(\S+)`)

// cpuTime is the user+system CPU time pid used so far (0 where that
// cannot be read).
func cpuTime(pid int) time.Duration {
	d, _ := proc.CPU(pid)
	return d
}

// startChild runs `bin hub` and returns its base URL and pid once it
// listens.
func startChild(ctx context.Context, bin, storage string) (string, int, func() error, error) {
	cmd := exec.CommandContext(ctx, bin, "hub")
	cmd.Env = append(os.Environ(), hubEnv(storage)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addrc <- m[1]
				sent = true
			}
			// Keep reading so the Hub never blocks on a full pipe.
		}
	}()
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			stopErr = cmd.Wait()
		})
		return stopErr
	}
	select {
	case addr := <-addrc:
		return "http://" + addr, cmd.Process.Pid, stop, nil
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		return "", 0, nil, errors.New("the Hub did not listen within 20 s")
	}
}

// startInProcess runs a Hub in this process, as `flowplane hub` would
// (including its GC target).
func startInProcess(ctx context.Context, storage string) (string, func() error, error) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400) // as cmd/flowplane's main (which adds a 384 MiB soft limit)
	}
	h, err := hub.New(ctx, hub.Options{
		Settings: hub.Settings{Address: "127.0.0.1:0", Storage: storage, OperatorToken: token, NodeToken: "bench-node-token", TokensFile: principal.tokens},
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = h.Close()
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.Serve(sctx, ln) }()
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			stopErr = errors.Join(<-done, h.Close())
		})
		return stopErr
	}
	return "http://" + ln.Addr().String(), stop, nil
}
