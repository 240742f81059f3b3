package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A netnsLab is a private network for multi-host tests on one Linux
// machine: a bridge in the root namespace carrying the lab's /24 (the test
// process itself is .1 on the bridge), and one network namespace per host,
// each with a veth into the bridge, its own address and lo up. Processes
// run in a host with `ip netns exec`, which execs the command in place, so
// the child's pid is the binary's and SIGKILL reaches the real process.
// Every name starts with netnsPrefix and the test's pid, so that a later
// run recognises and removes the leftovers of a crashed one.
type netnsLab struct {
	pid    int
	bridge string
	subnet string // "10.213.X": the lab's /24 without its last octet
	hostIP string // the bridge's address: the test process in the lab
	hosts  map[string]*netnsHost
}

// netnsHost is one namespace of the lab.
type netnsHost struct {
	name string // the test's name for it (hub, n1, ...)
	ns   string // the namespace's name
	veth string // the veth's end in the root namespace, on the bridge
	ip   string
}

// netnsPrefix starts every namespace, bridge and veth a lab creates:
// fpsn<pid>-<host> namespaces, fpsb<pid> bridges, fpsv<pid>i<n> and
// fpsp<pid>i<n> veth ends.
const netnsPrefix = "fps"

var leftoverName = regexp.MustCompile(`^` + netnsPrefix + `[nbvp]([0-9]+)`)

// newNetnsLab creates the lab with one namespace per name, or skips the
// test with the reason when it cannot: not Linux, not root, no ip(8), or
// namespaces refused. Everything is removed when t ends.
func newNetnsLab(t *testing.T, names ...string) *netnsLab {
	t.Helper()
	switch {
	case runtime.GOOS != "linux":
		t.Skip("network namespaces need Linux")
	case os.Geteuid() != 0:
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("network namespaces need ip(8) (iproute2): %v", err)
	}
	removeNetnsLeftovers(t)
	l := &netnsLab{pid: os.Getpid(), hosts: map[string]*netnsHost{}}
	l.bridge = fmt.Sprintf("%sb%d", netnsPrefix, l.pid)
	t.Cleanup(l.remove)
	probe := fmt.Sprintf("%sn%d-probe", netnsPrefix, l.pid)
	if out, err := ipCmd("netns", "add", probe); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	if out, err := ipCmd("netns", "del", probe); err != nil {
		t.Fatalf("delete namespace %s: %v: %s", probe, err, out)
	}
	l.subnet = freeSubnet(t)
	l.hostIP = l.subnet + ".1"
	l.must(t, "link", "add", l.bridge, "type", "bridge")
	l.must(t, "addr", "add", l.hostIP+"/24", "dev", l.bridge)
	l.must(t, "link", "set", l.bridge, "up")
	for i, name := range names {
		h := &netnsHost{name: name, ns: fmt.Sprintf("%sn%d-%s", netnsPrefix, l.pid, name),
			veth: fmt.Sprintf("%sv%di%d", netnsPrefix, l.pid, i), ip: fmt.Sprintf("%s.%d", l.subnet, 10+i)}
		peer := fmt.Sprintf("%sp%di%d", netnsPrefix, l.pid, i)
		l.hosts[name] = h
		l.must(t, "netns", "add", h.ns)
		l.must(t, "link", "add", h.veth, "type", "veth", "peer", "name", peer)
		l.must(t, "link", "set", peer, "netns", h.ns)
		l.must(t, "link", "set", h.veth, "master", l.bridge, "up")
		l.must(t, "-n", h.ns, "link", "set", peer, "name", "eth0")
		l.must(t, "-n", h.ns, "addr", "add", h.ip+"/24", "dev", "eth0")
		l.must(t, "-n", h.ns, "link", "set", "eth0", "up")
		l.must(t, "-n", h.ns, "link", "set", "lo", "up")
	}
	return l
}

// ipCmd runs ip(8) and returns its combined output.
func ipCmd(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (l *netnsLab) must(t *testing.T, args ...string) {
	t.Helper()
	if out, err := ipCmd(args...); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// host returns the named host; it fails the test for an unknown name.
func (l *netnsLab) host(t *testing.T, name string) *netnsHost {
	t.Helper()
	h, ok := l.hosts[name]
	if !ok {
		t.Fatalf("no host %q in the lab", name)
	}
	return h
}

// addr is host:port on the host's lab address.
func (h *netnsHost) addr(port int) string { return fmt.Sprintf("%s:%d", h.ip, port) }

// remove deletes the namespaces, the veths and the bridge; what is already
// gone is not an error.
func (l *netnsLab) remove() {
	for _, h := range l.hosts {
		_, _ = ipCmd("netns", "del", h.ns)
		_, _ = ipCmd("link", "del", h.veth)
	}
	_, _ = ipCmd("link", "del", l.bridge)
}

// removeNetnsLeftovers removes what a lab of a process that no longer runs
// (a crashed test) left: its namespaces, killing the processes still in
// them by pid, its veths and its bridge. A lab of a live process other than
// this one is left alone.
func removeNetnsLeftovers(t *testing.T) {
	t.Helper()
	stale := func(name string) bool {
		m := leftoverName.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil {
			return false
		}
		if pid == os.Getpid() {
			return true // a lab of this process not removed: none should be left
		}
		_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
		return err != nil
	}
	nsList, _ := ipCmd("netns", "list")
	for _, line := range strings.Split(nsList, "\n") {
		ns, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !stale(ns) {
			continue
		}
		pids, _ := ipCmd("netns", "pids", ns)
		for _, p := range strings.Fields(pids) {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		t.Logf("removing namespace %s left by an earlier run", ns)
		_, _ = ipCmd("netns", "del", ns)
	}
	links, _ := ipCmd("-o", "link", "show")
	for _, line := range strings.Split(links, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if stale(name) {
			t.Logf("removing link %s left by an earlier run", name)
			_, _ = ipCmd("link", "del", name)
		}
	}
}

// freeSubnet picks a /24 in 10.213.0.0/16 that no address or route of the
// root namespace uses yet, starting from one derived from the pid.
func freeSubnet(t *testing.T) string {
	t.Helper()
	addrs, _ := ipCmd("-4", "-o", "addr", "show")
	routes, _ := ipCmd("-4", "route", "show", "table", "all")
	used := addrs + "\n" + routes
	start := os.Getpid()%200 + 20
	for i := range 230 {
		s := fmt.Sprintf("10.213.%d", (start+i)%230+20)
		if !strings.Contains(used, s+".") {
			return s
		}
	}
	t.Skip("no free /24 in 10.213.0.0/16 for the namespace lab")
	return ""
}

// start runs flowplane (the test binary re-executed as the command line,
// see TestMain) in host h with args and env added to the test's
// environment, and waits until the process is the binary itself inside
// the namespace. It is killed when owner ends; when owner failed, the last
// lines of its output are logged under name.
func (l *netnsLab) start(t, owner *testing.T, h *netnsHost, name string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.ns, self}, args...)...)
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	logs := &logBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	owner.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if owner.Failed() {
			owner.Logf("%s (pid %d, namespace %s) output, last lines:\n%s", name, cmd.Process.Pid, h.ns, logs.tail(80))
		}
	})
	waitExecIn(t, cmd.Process.Pid, self, h.ns)
	return cmd
}

// waitExecIn waits until pid runs exe in another network namespace than
// the test's: ip netns exec has switched namespaces and exec'd, so the pid
// is the binary's own.
func waitExecIn(t *testing.T, pid int, exe, ns string) {
	t.Helper()
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.EvalSymlinks(exe)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, errExe := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		netns, errNS := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		if errExe == nil && errNS == nil && got == want && netns != self {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d: exe %q (%v), net namespace %q (%v): not %s in namespace %s", pid, got, errExe, netns, errNS, want, ns)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procMemory reads a process's resident set and its peak, in bytes, from
// /proc/<pid>/status.
func procMemory(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm, nil
}
