// Command split measures split placement (make bench-split): it builds
// flowplane, creates a network namespace per host on a private bridge (as
// the split test does; it needs root and ip(8)), starts a Hub and three
// Agents, one per namespace, each with a data plane on its own address, and
// runs a keyed tumbling-window job of generated clicks through the Hub:
//
//   - colocated: every task on n1;
//   - split: the same job placed split over n1 and n2, joined by the data
//     plane;
//   - checkpoint: the job split over n1, n2 and n3 with a checkpoint every
//     -checkpoint-interval, sampling the checkpoint durations the
//     coordinator reports.
//
// For each run it prints the events per second (events over the time from
// the create request to the Hub showing the job completed), the bytes the
// nodes sent over the data plane (svc_dataplane_bytes_total on their
// /metrics), and the CPU time of the node processes (utime + stime from
// /proc/<pid>/stat) per event.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/flowplane/flowplane/internal/netlab"
	"github.com/flowplane/flowplane/internal/wire"
)

const (
	operatorToken = "bench-split-operator-token"
	nodeToken     = "bench-split-node-token"
	apiToken      = "bench-split-node-api-token"
	hubPort       = 8080
	nodePort      = 8080
	dataPort      = 7070
)

type options struct {
	events, ckptEvents int
	parallelism, users int
	ckptInterval       time.Duration
	runs               string
	timeout            time.Duration
	bin, keep          string
}

func main() {
	var o options
	flag.IntVar(&o.events, "events", 4_000_000, "generated events per throughput run")
	flag.IntVar(&o.ckptEvents, "checkpoint-events", 4_000_000, "generated events of the checkpoint run")
	flag.IntVar(&o.parallelism, "parallelism", 2, "parallelism of the throughput runs (the checkpoint run uses 3)")
	flag.IntVar(&o.users, "users", 100_000, "distinct keys")
	flag.DurationVar(&o.ckptInterval, "checkpoint-interval", 500*time.Millisecond, "checkpoint interval of the checkpoint run")
	flag.StringVar(&o.runs, "runs", "colocated,split,checkpoint", "runs, comma-separated")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up on one run after this long")
	flag.StringVar(&o.bin, "bin", "", "flowplane binary (default: go build ./cmd/flowplane)")
	flag.StringVar(&o.keep, "dir", "", "work directory, kept (default: a temporary one, removed on success)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-split:", err)
		os.Exit(1)
	}
}

// cluster is the Hub and the nodes, each in its namespace.
type cluster struct {
	lab   *netlab.Lab
	hub   *hubClient
	nodes map[string]*exec.Cmd // node id -> its process (pid = the binary's)
	store string
	dir   string
}

func run(ctx context.Context, o options) (err error) {
	dir := o.keep
	if dir == "" {
		d, mkErr := os.MkdirTemp("", "bench-split-")
		if mkErr != nil {
			return mkErr
		}
		defer func() {
			if err == nil {
				os.RemoveAll(d)
			} else {
				fmt.Fprintln(os.Stderr, "bench-split: logs in", d)
			}
		}()
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin := o.bin
	if bin == "" {
		bin = filepath.Join(dir, "flowplane")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/flowplane")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build (run from the module root): %w", err)
		}
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return err
	}
	l, err := netlab.New(nil, "hub", "n1", "n2", "n3")
	if l != nil {
		defer l.Remove()
	}
	if err != nil {
		return err
	}
	c := &cluster{lab: l, nodes: map[string]*exec.Cmd{}, store: "file://" + filepath.Join(dir, "checkpoints"), dir: dir}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range slices.Backward(procs) {
			_ = p.Process.Signal(syscall.SIGTERM)
			_ = p.Wait()
		}
	}()
	start := func(h *netlab.Host, env []string, args ...string) (*exec.Cmd, error) {
		logf, err := os.Create(filepath.Join(dir, h.Name+".log"))
		if err != nil {
			return nil, err
		}
		defer logf.Close()
		cmd := h.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = logf, logf
		dieWithParent(cmd) // kept across ip's exec of the binary
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		procs = append(procs, cmd)
		return cmd, nil
	}
	hh := l.Host("hub")
	c.hub = &hubClient{base: "http://" + hh.Addr(hubPort), http: &http.Client{Timeout: 10 * time.Second}}
	if _, err := start(hh, []string{"SVC_HUB_ADDRESS=" + hh.Addr(hubPort), "SVC_HUB_STORAGE=" + filepath.Join(dir, "hub.db"),
		"SVC_OPERATOR_TOKEN=" + operatorToken, "SVC_NODE_TOKEN=" + nodeToken}, "hub"); err != nil {
		return err
	}
	if err := waitFor(ctx, 20*time.Second, "the Hub to be ready", c.hub.ready); err != nil {
		return err
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		h := l.Host(id)
		conf := filepath.Join(dir, id+".yaml")
		if err := os.WriteFile(conf, []byte(nodeDoc(id, h, c.hub.base)), 0o600); err != nil {
			return err
		}
		cmd, err := start(h, []string{"SVC_NODE_TOKEN=" + nodeToken}, "--config", conf, "--state-dir", filepath.Join(dir, id))
		if err != nil {
			return err
		}
		c.nodes[id] = cmd
	}
	if err := waitFor(ctx, 20*time.Second, "every Agent online", func() bool { return c.hub.online() == 3 }); err != nil {
		return err
	}
	fmt.Printf("flowplane split benchmark: keyed 1 s tumbling-window count over %d users, generate at full speed -> window -> drop;\n"+
		"a Hub and three Agents in network namespaces on %s.0/24, data plane on port %d; %d CPUs\n\n",
		o.users, l.Subnet, dataPort, runtime.NumCPU())
	printHeader()
	defer printNotes()
	for _, name := range strings.Split(o.runs, ",") {
		var r jobRun
		switch strings.TrimSpace(name) {
		case "colocated":
			r = jobRun{name: "colocated", placement: wire.PlacementColocated, nodes: []string{"n1"}, events: o.events, parallelism: o.parallelism, ckpt: 60 * time.Second}
		case "split":
			r = jobRun{name: "split", placement: wire.PlacementSplit, nodes: []string{"n1", "n2"}, events: o.events, parallelism: o.parallelism, ckpt: 60 * time.Second}
		case "checkpoint":
			r = jobRun{name: "checkpoint", placement: wire.PlacementSplit, nodes: []string{"n1", "n2", "n3"}, events: o.ckptEvents, parallelism: 3, ckpt: o.ckptInterval}
		default:
			return fmt.Errorf("unknown run %q (colocated, split, checkpoint)", name)
		}
		r.users = o.users
		res, err := c.run(ctx, r, o.timeout)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		printRow(res)
		if r.name == "checkpoint" {
			printCheckpoints(res)
		}
	}
	return nil
}

func nodeDoc(id string, h *netlab.Host, hubURL string) string {
	return fmt.Sprintf(`logging: {level: warn}
health_check:
  address: %q
  api_token: %q
  hub_urls: [%q]
  node_id: %s
  node_token: "${env:SVC_NODE_TOKEN}"
  data_port: %d
  data_host: %q
streams: []
`, h.Addr(nodePort), apiToken, hubURL, id, dataPort, h.IP)
}

// waitFor polls cond every 20 ms until it holds, limit passes or ctx ends.
func waitFor(ctx context.Context, limit time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// hubClient calls the Hub's operator API.
type hubClient struct {
	base string
	http *http.Client
}

func (h *hubClient) do(method, path, body string, out any) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.base+"/api/v1"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (h *hubClient) ready() bool {
	resp, err := h.http.Get(h.base + "/readiness")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// online counts the nodes the Hub sees online with a data address.
func (h *hubClient) online() int {
	var p wire.Page[struct {
		Status      string `json:"status"`
		DataAddress string `json:"data_address"`
	}]
	if h.do(http.MethodGet, "/nodes?page_size=100", "", &p) != nil {
		return 0
	}
	n := 0
	for _, v := range p.Items {
		if v.Status == "online" && v.DataAddress != "" {
			n++
		}
	}
	return n
}

// metrics reads a node's /metrics (public, no token).
func metrics(h *netlab.Host) (string, error) {
	resp, err := http.Get("http://" + h.Addr(nodePort) + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics of %s: %d", h.Name, resp.StatusCode)
	}
	return string(b), nil
}
