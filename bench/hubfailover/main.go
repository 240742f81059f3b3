// Command hubfailover measures how long the Hubs sharing one PostgreSQL
// database take to dispatch again after the leader dies: leader SIGKILL to
// the first command the new leader dispatches.
//
// It starts PostgreSQL (Debian's binaries in a temporary directory, as the
// tests do) unless -pg names an empty database, two Hubs of -bin on it
// (SVC_HUB_LEASE_TTL -ttl) and one Agent (-bin with hub_urls listing
// both). Then -n times: it finds the leader, SIGKILLs it, and writes a
// stream's desired state through the other Hub every 100 ms until one of
// those writes is dispatched (its operation's dispatched_at) and carried
// out by the Agent (succeeded); then it starts the killed Hub again as a
// standby. It prints p50, p99 and max of kill -> first dispatch and of
// kill -> first command carried out, and how long the standby took to lead.
//
// Usage (see bench/README.md):
//
//	go build -o bench/results/flowplane ./cmd/flowplane
//	go run ./bench/hubfailover -bin bench/results/flowplane
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/pgtest"
	"github.com/flowplane/flowplane/internal/wire"
)

const (
	operatorToken = "bench-operator-token"
	nodeToken     = "bench-node-token-0123"
	nodeID        = "bench-node"
	streamID      = "s1"
)

var client = &http.Client{Timeout: 5 * time.Second}

func main() {
	var (
		bin   = flag.String("bin", "", "flowplane binary to run as the Hubs and the Agent (required)")
		n     = flag.Int("n", 10, "leader kills")
		pgURL = flag.String("pg", "", "URL of an empty PostgreSQL database (default: a server of its own in a temporary directory)")
		ttl   = flag.Duration("ttl", 3*time.Second, "the Hubs' SVC_HUB_LEASE_TTL")
	)
	flag.Parse()
	if *bin == "" || *n < 1 {
		fmt.Fprintln(os.Stderr, "hubfailover: want -bin <flowplane binary> and -n >= 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *bin, *n, *pgURL, *ttl); err != nil {
		fmt.Fprintln(os.Stderr, "hubfailover:", err)
		os.Exit(1)
	}
}

// proc is a child process of -bin with its output kept for errors.
type proc struct {
	name string
	args []string
	env  []string
	cmd  *exec.Cmd
	out  output
}

// output is a child's output, read while the child writes it.
type output struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

func (o *output) Reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Reset()
}

func (p *proc) start(bin string) error {
	p.out.Reset()
	p.cmd = exec.Command(bin, p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	return p.cmd.Start()
}

func (p *proc) kill() {
	if p.cmd != nil && p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

func run(ctx context.Context, bin string, n int, pgURL string, ttl time.Duration) error {
	dir, err := os.MkdirTemp("", "hubfailover-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if pgURL == "" {
		pg, err := pgtest.Launch()
		if err != nil {
			return err
		}
		defer pg.Close()
		if err := pg.ExecErr("CREATE DATABASE hub"); err != nil {
			return err
		}
		pgURL = pg.DatabaseURI("hub")
	}
	var hubs []*proc
	var urls []string
	for _, name := range []string{"hub-a", "hub-b"} {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		h := &proc{name: name, args: []string{"hub"}, env: []string{hub.EnvAddress + "=" + addr, hub.EnvStorage + "=" + pgURL,
			hub.EnvOperatorToken + "=" + operatorToken, hub.EnvNodeToken + "=" + nodeToken, hub.EnvInsecureLocal + "=",
			hub.EnvLeaseTTL + "=" + ttl.String(), hub.EnvAdvertiseURL + "=http://" + addr}}
		defer h.kill()
		if err := startHub(ctx, bin, h); err != nil {
			return err
		}
		hubs = append(hubs, h)
		urls = append(urls, "http://"+addr)
	}
	agent, err := startAgent(bin, dir, urls)
	if err != nil {
		return err
	}
	defer agent.kill()
	if err := waitFor(ctx, 30*time.Second, "the Agent online", func() bool {
		var v wire.NodeView
		return get(urls[0]+"/api/v1/nodes/"+nodeID, &v) == nil && v.Status == "online"
	}); err != nil {
		return fmt.Errorf("%w\n%s", err, agent.out.String())
	}

	var dispatch, executed, lead []time.Duration
	for round := range n {
		li, epoch, err := leader(ctx, urls)
		if err != nil {
			return err
		}
		survivor := urls[1-li]
		hubs[li].kill()
		killed := time.Now()
		d, e, l, err := firstDispatch(ctx, survivor, epoch, killed)
		if err != nil {
			return fmt.Errorf("round %d: %w\n%s", round+1, err, hubs[1-li].out.String())
		}
		dispatch, executed, lead = append(dispatch, d), append(executed, e), append(lead, l)
		fmt.Printf("kill %2d: leads after %v, first dispatch after %v, carried out after %v\n", round+1,
			l.Round(time.Millisecond), d.Round(time.Millisecond), e.Round(time.Millisecond))
		if err := startHub(ctx, bin, hubs[li]); err != nil {
			return err
		}
	}
	fmt.Printf("\n%d leader kills, lease TTL %v\n", n, ttl)
	report("kill -> new leader", lead)
	report("kill -> first dispatch", dispatch)
	report("kill -> first command carried out", executed)
	return nil
}

// report prints p50, p99 and max of ds.
func report(what string, ds []time.Duration) {
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	fmt.Printf("%-36s p50 %8v  p99 %8v  max %8v\n", what, q(0.50).Round(time.Millisecond), q(0.99).Round(time.Millisecond),
		ds[len(ds)-1].Round(time.Millisecond))
}

// firstDispatch writes the stream's desired state through survivor every
// 100 ms until one of the writes is dispatched and carried out, and
// returns kill -> dispatched_at, kill -> finished_at and kill -> the
// survivor leading at an epoch above epoch.
func firstDispatch(ctx context.Context, survivor string, epoch int64, killed time.Time) (dispatch, executed, lead time.Duration, err error) {
	var ops []string
	lastWrite := time.Time{}
	deadline := killed.Add(60 * time.Second)
	for i := 0; ; i++ {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, 0, 0, fmt.Errorf("no write dispatched within 60 s of the kill (%d written)", len(ops))
		}
		if lead == 0 {
			var s hub.System
			if get(survivor+"/api/v1/system", &s) == nil && s.HA.Role == "leader" && s.HA.Epoch > epoch {
				lead = time.Since(killed)
			}
		}
		if time.Since(lastWrite) >= 100*time.Millisecond {
			lastWrite = time.Now()
			state := []string{"running", "stopped"}[i%2]
			var w wire.DesiredStateResponse
			if err := do(http.MethodPut, survivor+"/api/v1/nodes/"+nodeID+"/streams/"+streamID+"/desired-state",
				`{"state":"`+state+`"}`, http.StatusAccepted, &w); err == nil {
				ops = append(ops, w.OperationID)
			}
		}
		for _, id := range ops {
			var op wire.Operation
			if get(survivor+"/api/v1/operations/"+id, &op) != nil || op.DispatchedAt.IsZero() || op.State != wire.OpSucceeded {
				continue
			}
			if lead == 0 {
				lead = time.Since(killed) // it dispatched, so it leads
			}
			return op.DispatchedAt.Sub(killed), op.FinishedAt.Sub(killed), lead, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leader returns the index of the Hub that leads and its epoch.
func leader(ctx context.Context, urls []string) (int, int64, error) {
	li, epoch := -1, int64(0)
	err := waitFor(ctx, 30*time.Second, "a leader", func() bool {
		for i, u := range urls {
			var s hub.System
			if get(u+"/api/v1/system", &s) == nil && s.HA.Role == "leader" {
				li, epoch = i, s.HA.Epoch
				return true
			}
		}
		return false
	})
	return li, epoch, err
}

func startHub(ctx context.Context, bin string, h *proc) error {
	if err := h.start(bin); err != nil {
		return err
	}
	addr := strings.TrimPrefix(h.env[0], hub.EnvAddress+"=")
	if err := waitFor(ctx, 30*time.Second, h.name+" ready", func() bool {
		resp, err := client.Get("http://" + addr + "/readiness")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		return fmt.Errorf("%w\n%s", err, h.out.String())
	}
	return nil
}

// startAgent runs a node with one stream whose Agent lists both Hubs.
func startAgent(bin, dir string, urls []string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	list, _ := json.Marshal(urls)
	conf := fmt.Sprintf("logging: {level: warn}\nhealth_check:\n  address: %q\n  hub_urls: %s\n  node_id: %s\n  node_token: \"${env:%s}\"\n"+
		"streams:\n  - id: %s\n    input: {type: generate, context: '{\"n\": 1}', interval: 100ms}\n    pipeline: {processors: []}\n    output: {type: drop}\n",
		addr, list, nodeID, hub.EnvNodeToken, streamID)
	path := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	p := &proc{name: "agent", args: []string{"--config", path, "--state-dir", filepath.Join(dir, "node")}, env: []string{hub.EnvNodeToken + "=" + nodeToken}}
	return p, p.start(bin)
}

func waitFor(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func get(u string, v any) error { return do(http.MethodGet, u, "", http.StatusOK, v) }

// do sends an operator request and decodes an answer of status want into v.
func do(method, u, body string, want int, v any) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d: %s", method, u, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
