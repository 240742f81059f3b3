// Command dataflood reproduces the data-plane flood of issue 29 (make
// bench-dataflood): it builds flowplane, starts a node with a data plane
// and one stream generating a message every millisecond, and opens
// -conns connections to its data port (half from 127.0.0.1, half from
// 127.0.0.2 where the host routes 127/8 to loopback), each sending the
// header of a TLS record and then nothing, held for -hold. Meanwhile it
// samples the node's RSS (/proc/<pid>/status VmRSS, and VmHWM at the end),
// times GET /status on the Node API, and reads the stream's output count
// to see that it progresses. Only loopback addresses are used.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	conns := flag.Int("conns", 20000, "connections to open, held at once")
	hold := flag.Duration("hold", 15*time.Second, "how long the flood holds its connections")
	bin := flag.String("bin", "", "flowplane binary (default: go build it)")
	worker := flag.Bool("worker", false, "internal: be one flooding process")
	target := flag.String("target", "", "internal: the worker's target")
	source := flag.String("source", "", "internal: the worker's source address")
	flag.Parse()
	if *worker {
		opened, failed, err := floodFrom(*target, *source, *conns, *hold)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dataflood worker:", err)
			os.Exit(1)
		}
		fmt.Println(opened, failed)
		return
	}
	if err := run(*conns, *hold, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "dataflood:", err)
		os.Exit(1)
	}
}

func run(conns int, hold time.Duration, bin string) error {
	dir, err := os.MkdirTemp("", "dataflood")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "flowplane")
		b := exec.Command("go", "build", "-o", bin, "./cmd/flowplane")
		b.Stdout, b.Stderr = os.Stdout, os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	api, data := freePort(), freePort()
	conf := fmt.Sprintf(`logging: {level: warn}
health_check: {address: "127.0.0.1:%d", data_port: %d, data_host: 127.0.0.1}
streams:
  - id: busy
    input: {type: generate, context: '{"n": {{count}}}', interval: 1ms}
    pipeline: {processors: [{type: json}]}
    output: {type: drop}
`, api, data)
	cfgPath := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(cfgPath, []byte(conf), 0o600); err != nil {
		return err
	}
	logPath := filepath.Join(dir, "node.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	node := exec.Command(bin, "--config", cfgPath, "--state-dir", filepath.Join(dir, "state"))
	node.Stdout, node.Stderr = logf, logf
	if err := node.Start(); err != nil {
		return err
	}
	defer func() { _ = node.Process.Kill(); _ = node.Wait() }()
	base := fmt.Sprintf("http://127.0.0.1:%d", api)
	if err := waitReady(base, 30*time.Second); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // let the stream settle
	pid := node.Process.Pid
	rssBefore := procKB(pid, "VmRSS")
	outBefore := streamOutput(base)

	ctx, cancel := context.WithTimeout(context.Background(), hold+2*time.Minute)
	defer cancel()
	var peakRSS atomic.Int64
	var maxStatus time.Duration
	var statusFails, statusCalls int
	var smu sync.Mutex
	sampling, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	var swg sync.WaitGroup
	swg.Add(1)
	go func() { // RSS and Node API latency, every 100 ms
		defer swg.Done()
		for sampling.Err() == nil {
			if kb := procKB(pid, "VmRSS"); kb > peakRSS.Load() {
				peakRSS.Store(kb)
			}
			start := time.Now()
			ok := get(base+"/status", nil) == nil
			d := time.Since(start)
			smu.Lock()
			statusCalls++
			if !ok {
				statusFails++
			}
			maxStatus = max(maxStatus, d)
			smu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()

	// Two flooding processes, one per source address, each holding half
	// of the connections: one process's descriptors would not do.
	target := fmt.Sprintf("127.0.0.1:%d", data)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	start := time.Now()
	type result struct {
		opened, failed int64
		err            error
	}
	results := make(chan result, 2)
	for i, src := range []string{"127.0.0.1", "127.0.0.2"} {
		n := conns / 2
		if i == 0 {
			n = conns - conns/2
		}
		w := exec.CommandContext(ctx, self, "-worker", "-target", target, "-source", src, "-conns", strconv.Itoa(n), "-hold", hold.String())
		w.Stderr = os.Stderr
		go func() {
			out, err := w.Output()
			var r result
			r.err = err
			if err == nil {
				_, r.err = fmt.Sscanf(string(out), "%d %d", &r.opened, &r.failed)
			}
			results <- r
		}()
	}
	var opened, failed int64
	for range 2 {
		r := <-results
		if r.err != nil {
			return fmt.Errorf("flood worker: %w", r.err)
		}
		opened, failed = opened+r.opened, failed+r.failed
	}
	took := time.Since(start)
	outFlood := streamOutput(base)
	stopSampling()
	swg.Wait()
	var st struct {
		DataPlane struct {
			Refused    int64 `json:"connections_refused"`
			Handshakes int   `json:"handshakes"`
		} `json:"data_plane"`
	}
	_ = get(base+"/status", &st)
	logBytes, _ := os.ReadFile(logPath)
	warns := strings.Count(string(logBytes), "data plane connections refused")
	fmt.Printf("connections: %d asked, %d connected, %d failed to connect; the flood took %v (held %v)\n", conns, opened, failed, took.Round(time.Millisecond), hold)
	fmt.Printf("node RSS: %.1f MiB before, %.1f MiB peak sampled, VmHWM %.1f MiB\n", mib(rssBefore), mib(peakRSS.Load()), mib(procKB(pid, "VmHWM")))
	fmt.Printf("refused by the node: %d; refusal log lines: %d\n", st.DataPlane.Refused, warns)
	fmt.Printf("Node API GET /status: %d calls, %d failed, slowest %v\n", statusCalls, statusFails, maxStatus.Round(time.Millisecond))
	fmt.Printf("stream output: %d messages before the flood, %d after it (+%d during)\n", outBefore, outFlood, outFlood-outBefore)
	return nil
}

func mib(kb int64) float64 { return float64(kb) / 1024 }

// procKB reads a "Name: N kB" line of /proc/<pid>/status; 0 when absent.
func procKB(pid int, name string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

var client = &http.Client{Timeout: 10 * time.Second}

func get(url string, into any) error {
	res, err := client.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	if into == nil {
		return nil
	}
	return json.NewDecoder(res.Body).Decode(into)
}

func waitReady(base string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if get(base+"/ready", nil) == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the node at %s was not ready within %v", base, d)
}

// streamOutput is the messages the stream "busy" has written so far.
func streamOutput(base string) int64 {
	var s struct {
		Observed struct {
			Counters struct {
				Sent int64 `json:"sent"`
			} `json:"counters"`
		} `json:"observed"`
	}
	_ = get(base+"/streams/busy", &s)
	return s.Observed.Counters.Sent
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// floodFrom opens n connections from source to target at once, each
// sending a TLS record header and then nothing, and holds them for hold.
func floodFrom(target, source string, n int, hold time.Duration) (opened, failed int64, err error) {
	need := uint64(n) + 256
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < need {
		rl.Cur = min(rl.Max, need)
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	if rl.Cur < need {
		return 0, 0, fmt.Errorf("open file limit %d: %d connections need %d (lower -conns)", rl.Cur, n, need)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()
	var o, f atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	src := &net.TCPAddr{IP: net.ParseIP(source)}
	for range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: src}
			c, err := d.DialContext(ctx, "tcp", target)
			<-sem
			if err != nil {
				f.Add(1)
				return
			}
			defer c.Close()
			o.Add(1)
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte{22, 3, 1, 0, 200})
			<-ctx.Done()
		}()
	}
	wg.Wait()
	return o.Load(), f.Load(), nil
}
