// Command hubflood reproduces the Hub flood of issue 29 (make
// bench-hubflood): it builds flowplane, starts a Hub as a child process and
// lets -nodes fake nodes register with the shared node token and report
// in a loop for -duration. Two rounds, each on a fresh Hub:
//
//   - as filed: each node advertises -caps capabilities and reports
//     -streams streams, from one address with the default admission;
//   - within the bounds: what an attacker with many addresses gets through
//     (SVC_HUB_REGISTER_RATE=0): 256 capabilities of 128 bytes, reports of
//     1,024 streams whose strings are as long as the Hub takes.
//
// Meanwhile it samples the Hub's RSS (/proc/<pid>/status) and times
// GET /api/v1/streams every 250 ms; at the end it prints the answers by
// status, the database size (with its WAL), peak RSS and the latency of
// GET /streams during the flood and after it, once the Hub's CPU settled. Only loopback addresses are
// used.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const apiPrefix = "/api/v1"

type options struct {
	nodes, caps, streams, workers int
	duration                      time.Duration
	bin                           string
}

func main() {
	var o options
	flag.IntVar(&o.nodes, "nodes", 300, "fake nodes")
	flag.IntVar(&o.caps, "caps", 1024, "capabilities each node advertises in the round as filed")
	flag.IntVar(&o.streams, "streams", 3000, "streams of each report in the round as filed")
	flag.IntVar(&o.workers, "workers", 16, "requests in flight at once")
	flag.DurationVar(&o.duration, "duration", 120*time.Second, "how long each round floods")
	flag.StringVar(&o.bin, "bin", "", "flowplane binary (default: go build it)")
	round := flag.String("round", "both", "filed, bounded or both")
	flag.Parse()
	if err := run(o, *round); err != nil {
		fmt.Fprintln(os.Stderr, "hubflood:", err)
		os.Exit(1)
	}
}

func run(o options, round string) error {
	dir, err := os.MkdirTemp("", "hubflood")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if o.bin == "" {
		o.bin = filepath.Join(dir, "flowplane")
		b := exec.Command("go", "build", "-o", o.bin, "./cmd/flowplane")
		b.Stdout, b.Stderr = os.Stdout, os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	fmt.Printf("%d nodes, %d requests in flight, %s a round\n\n", o.nodes, o.workers, o.duration)
	fmt.Println("| round | answers | DB + WAL before → after (WAL) | RSS before → peak | GET /streams p50 / p99 / max during | after | streams listed |")
	fmt.Println("|---|---|---|---|---|---|---|")
	rounds := []struct {
		name   string
		env    []string
		caps   int
		capLen int
		report func(seq int64) wire
	}{
		{"filed", nil, o.caps, 24, func(seq int64) wire { return report(seq, o.streams, 16, 16) }},
		{"bounded", []string{"SVC_HUB_REGISTER_RATE=0"}, 256, 128, func(seq int64) wire { return report(seq, 1024, 128, 1024) }},
	}
	for i, r := range rounds {
		if round != "both" && round != r.name {
			continue
		}
		res, err := flood(o, filepath.Join(dir, strconv.Itoa(i)), r.env, r.caps, r.capLen, r.report)
		if err != nil {
			return fmt.Errorf("round %s: %w", r.name, err)
		}
		fmt.Printf("| %s | %s | %.1f → %.1f MiB (%.1f) | %d → %d MiB | %s | %s | %d |\n", r.name, res.answers, mib(res.dbBefore), mib(res.dbAfter),
			mib(res.walAfter), res.rssBefore>>10, res.rssPeak>>10, res.during, res.after, res.listed)
	}
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// wire is a JSON body.
type wire = map[string]any

func report(seq int64, streams, idLen, errLen int) wire {
	state := []string{"running", "failed"}[seq%2]
	ss := make([]wire, streams)
	for i := range ss {
		ss[i] = wire{"id": fmt.Sprintf("s%0*d", idLen-1, i), "state": state, "generation": seq, "config_version": strings.Repeat("v", 255),
			"action_id": strings.Repeat("a", 255), "last_error": strings.Repeat("e", errLen)}
	}
	m := wire{}
	for i := range 64 {
		m[fmt.Sprintf("metric_%d", i)] = i
	}
	return wire{"report_seq": seq, "streams": ss, "configuration_version": "v1", "metrics": m}
}

type result struct {
	answers                     string
	dbBefore, dbAfter, walAfter int64
	rssBefore, rssPeak          int64 // KiB
	during, after               string
	listed                      int
}

// hubProc is the Hub child process.
type hubProc struct {
	base, opToken, nodeToken, db string
	pid                          int
	stop                         func()
}

func startHub(bin, dir string, env []string) (*hubProc, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	h := &hubProc{base: "http://" + addr, opToken: "hubflood-operator-token-0123456789", nodeToken: "hubflood-node-token-0123456789ab",
		db: filepath.Join(dir, "hub.db")}
	logf, err := os.Create(filepath.Join(dir, "hub.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "hub")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "SVC_HUB_ADDRESS="+addr, "SVC_HUB_STORAGE="+h.db, "SVC_OPERATOR_TOKEN="+h.opToken, "SVC_NODE_TOKEN="+h.nodeToken)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	h.pid = cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	h.stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if res, err := http.Get(h.base + "/readiness"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return h, nil
			}
		}
	}
	h.stop()
	return nil, errors.New("the Hub was not ready within 60 s")
}

var client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// post sends body and returns the status and the problem code.
func post(ctx context.Context, url, token string, body []byte, into any) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode == http.StatusOK && into != nil {
		return res.StatusCode, "", json.Unmarshal(b, into)
	}
	var p struct{ Code string }
	_ = json.Unmarshal(b, &p)
	return res.StatusCode, p.Code, nil
}

// flood runs one round on a fresh Hub.
func flood(o options, dir string, env []string, caps, capLen int, rep func(int64) wire) (result, error) {
	var res result
	h, err := startHub(o.bin, dir, env)
	if err != nil {
		return res, err
	}
	defer h.stop()
	res.dbBefore, res.rssBefore = dbSize(h.db), procKB(h.pid, "VmRSS")
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()

	// Bodies are built once per node and sequence parity: the flood
	// measures the Hub, not this process.
	capList := make([]string, caps)
	for i := range capList {
		capList[i] = fmt.Sprintf("c%0*d", capLen-1, i)
	}
	reports := [2][]byte{}
	for i := range reports {
		b, _ := json.Marshal(rep(int64(i)))
		reports[i] = b
	}
	var mu sync.Mutex
	answers := map[string]int{}
	note := func(status int, code string) {
		mu.Lock()
		answers[strings.TrimSpace(fmt.Sprint(status, " ", code))]++
		mu.Unlock()
	}
	type node struct {
		id, session string
		seq         int64
	}
	work := make(chan *node)
	var wg sync.WaitGroup
	for range o.workers {
		wg.Go(func() {
			for n := range work {
				if n.session == "" {
					body, _ := json.Marshal(wire{"node_id": n.id, "boot_id": "boot-" + n.id, "version": "flood", "protocol_version": 1,
						"capabilities": capList, "node_credential": "hubflood-credential-0123456789abcdef-" + n.id, "lease_ttl_ms": 600000})
					var rr struct {
						SessionToken string `json:"session_token"`
					}
					status, code, err := post(ctx, h.base+apiPrefix+"/agent/register", h.nodeToken, body, &rr)
					if err != nil {
						continue
					}
					note(status, code)
					n.session = rr.SessionToken
					if n.session == "" {
						continue
					}
				}
				n.seq++
				// The report body with this node's boot and sequence.
				body := bytes.Replace(reports[n.seq%2], []byte(`"report_seq":`+strconv.Itoa(int(n.seq%2))),
					[]byte(`"boot_id":"boot-`+n.id+`","report_seq":`+strconv.FormatInt(n.seq, 10)), 1)
				status, code, err := post(ctx, h.base+apiPrefix+"/agent/report", n.session, body, nil)
				if err != nil {
					continue
				}
				note(status, code)
				if status == http.StatusUnauthorized {
					n.session = ""
				}
			}
		})
	}
	var during []time.Duration
	var peak int64
	sampled := make(chan struct{})
	go func() { // RSS and GET /streams, every 250 ms
		defer close(sampled)
		for ctx.Err() == nil {
			peak = max(peak, procKB(h.pid, "VmRSS"))
			if d, _, err := listStreams(h); err == nil {
				during = append(during, d)
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	nodes := make([]*node, o.nodes)
	for i := range nodes {
		nodes[i] = &node{id: fmt.Sprintf("flood-%04d", i)}
	}
feed:
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			break feed
		case work <- nodes[i%len(nodes)]:
		}
	}
	close(work)
	wg.Wait()
	<-sampled
	settle(h.pid, time.Minute) // let the Hub finish what the flood left it
	var after []time.Duration
	for range 20 {
		d, listed, err := listStreams(h)
		if err != nil {
			return res, err
		}
		after, res.listed = append(after, d), listed
	}
	res.rssPeak = max(peak, procKB(h.pid, "VmHWM"))
	res.dbAfter = dbSize(h.db)
	if fi, err := os.Stat(h.db + "-wal"); err == nil {
		res.walAfter = fi.Size()
	}
	res.during, res.after = latencies(during), latencies(after)
	keys := make([]string, 0, len(answers))
	for k := range answers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		keys[i] = fmt.Sprintf("%s: %d", k, answers[k])
	}
	res.answers = strings.Join(keys, ", ")
	return res, nil
}

// settle waits until pid used under a tenth of a CPU over a second, or
// for limit.
func settle(pid int, limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		before := cpuTicks(pid)
		time.Sleep(time.Second)
		if cpuTicks(pid)-before < 10 { // clock ticks of 10 ms
			return
		}
	}
}

// cpuTicks is pid's user and system time in clock ticks (/proc/<pid>/stat
// fields 14 and 15).
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st
}

// listStreams times GET /api/v1/streams (first page) and returns the
// total it answers.
func listStreams(h *hubProc) (time.Duration, int, error) {
	req, _ := http.NewRequest("GET", h.base+apiPrefix+"/streams?page_size=50", nil)
	req.Header.Set("Authorization", "Bearer "+h.opToken)
	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	var pg struct{ Total int }
	err = json.NewDecoder(res.Body).Decode(&pg)
	d := time.Since(start)
	if res.StatusCode != http.StatusOK || err != nil {
		return d, 0, fmt.Errorf("GET /streams: %d %v", res.StatusCode, err)
	}
	return d, pg.Total, nil
}

func latencies(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none answered"
	}
	slices.Sort(ds)
	q := func(p float64) time.Duration {
		return ds[min(len(ds)-1, int(p*float64(len(ds))))].Round(100 * time.Microsecond)
	}
	return fmt.Sprintf("%v / %v / %v (%d)", q(0.5), q(0.99), ds[len(ds)-1].Round(100*time.Microsecond), len(ds))
}

func dbSize(path string) int64 {
	var n int64
	for _, s := range []string{"", "-wal", "-shm"} {
		if fi, err := os.Stat(path + s); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// procKB reads a KiB field of /proc/<pid>/status (0 where there is none).
func procKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
