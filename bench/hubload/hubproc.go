package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flowplane/flowplane/bench/internal/proc"
	"github.com/flowplane/flowplane/internal/hub"
)

// hubUnderTest is a running Hub: where it listens, its tokens, and the
// process whose CPU and memory are measured.
type hubUnderTest struct {
	base      string
	opToken   string
	nodeToken string
	pid       int
	inProcess bool
	logPath   string
	stop      func() error
}

// startHub starts the Hub over a database in dir, as a child process of
// the binary bin or, when inProcess, inside this process, and waits until
// /readiness answers 200.
func startHub(ctx context.Context, dir, bin string, inProcess bool, env []string) (*hubUnderTest, error) {
	addr, err := freeAddress()
	if err != nil {
		return nil, err
	}
	h := &hubUnderTest{base: "http://" + addr, opToken: randomToken("op"), nodeToken: randomToken("node"),
		logPath: filepath.Join(dir, "hub.log")}
	// Every simulated agent registers from 127.0.0.1, and there may be
	// more than the default SVC_HUB_MAX_NODES: admission is off.
	settings := hub.Settings{Address: addr, Storage: filepath.Join(dir, "hub.db"), OperatorToken: h.opToken, NodeToken: h.nodeToken,
		MaxNodes: -1, RegisterRate: -1}
	if inProcess {
		err = h.startInProcess(ctx, settings)
	} else {
		err = h.startChild(bin, settings, env)
	}
	if err != nil {
		return nil, err
	}
	if err := h.awaitReady(ctx, 60*time.Second); err != nil {
		_ = h.stop()
		return nil, fmt.Errorf("%w; hub log: %s", err, h.logPath)
	}
	return h, nil
}

func (h *hubUnderTest) startChild(bin string, s hub.Settings, env []string) error {
	logf, err := os.Create(h.logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "hub")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, hub.EnvAddress+"="+s.Address, hub.EnvStorage+"="+s.Storage,
		hub.EnvOperatorToken+"="+s.OperatorToken, hub.EnvNodeToken+"="+s.NodeToken, hub.EnvMaxNodes+"=0", hub.EnvRegisterRate+"=0")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start hub: %w", err)
	}
	h.pid = cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logf.Close() }()
	h.stop = func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			return errors.New("hub did not stop within 20 s of SIGTERM; killed")
		}
	}
	return nil
}

func (h *hubUnderTest) startInProcess(ctx context.Context, s hub.Settings) error {
	logf, err := os.Create(h.logPath)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	hb, err := hub.New(hctx, hub.Options{Settings: s, Logger: log, Version: "hubload"})
	if err != nil {
		cancel()
		logf.Close()
		return err
	}
	ln, err := net.Listen("tcp", s.Address)
	if err != nil {
		cancel()
		hb.Close()
		logf.Close()
		return err
	}
	done := make(chan error, 1)
	go func() { done <- hb.Serve(hctx, ln) }()
	h.pid, h.inProcess = os.Getpid(), true
	h.stop = func() error {
		cancel()
		err := <-done
		return errors.Join(err, hb.Close(), logf.Close())
	}
	return nil
}

func (h *hubUnderTest) awaitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if !h.inProcess && !alive(h.pid) {
			return errors.New("the hub exited during start-up")
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", h.base+"/readiness", nil)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("the hub was not ready within %s", limit)
}

func freeAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func randomToken(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// buildHub builds ./cmd/flowplane from the module at root into dir.
func buildHub(root, dir string) (string, error) {
	bin := filepath.Join(dir, "flowplane")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/flowplane")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/flowplane: %w", err)
	}
	return bin, nil
}

// cpuTime is the user+system CPU time pid has used.
func cpuTime(pid int) (time.Duration, error) { return proc.CPU(pid) }

// memory is a process's resident set now and at its peak, and its threads.
type memory struct {
	RSS, HWM int64 // bytes
	Threads  int
}

func memoryOf(pid int) (memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	defer f.Close()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fs[0], 10, 64)
		switch k {
		case "VmRSS":
			m.RSS = n << 10
		case "VmHWM":
			m.HWM = n << 10
		case "Threads":
			m.Threads = int(n)
		}
	}
	return m, sc.Err()
}

// openFiles counts pid's file descriptors (sockets, mostly).
func openFiles(pid int) int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(es)
}

func alive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// machineBusy is the CPU time all processors spent not idle (user, nice,
// system, irq, softirq, steal), from /proc/stat: with the Hub's and this
// process's own CPU it shows what else ran on the machine meanwhile.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("malformed /proc/stat")
	}
	var busy int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / proc.ClockTicks, nil
}

// loadAverage is the first field of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// goMemory reads the Go runtime gauges of the Hub's /metrics (its Go
// collector): where its resident memory goes. Fetched once, after the
// window (the page lists every node's reported metrics).
func goMemory(ctx context.Context, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	want := map[string]bool{"go_goroutines": true, "go_memstats_heap_inuse_bytes": true, "go_memstats_heap_alloc_bytes": true,
		"go_memstats_stack_inuse_bytes": true, "go_memstats_next_gc_bytes": true, "go_memstats_sys_bytes": true,
		"go_memstats_heap_idle_bytes": true, "go_memstats_heap_released_bytes": true}
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}
