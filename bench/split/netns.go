package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// lab is a private network of network namespaces on one Linux bridge, as
// the split test's netnsLab (cmd/flowplane/netns_test.go) builds it: the
// bridge in the root namespace carries the lab's /24 and the benchmark's
// own address (.1); each host is a namespace with a veth into the bridge,
// an address and lo up. Processes run in a host through `ip netns exec`,
// which execs in place: the child's pid is the binary's. Names start with
// "fps" and the pid, the test's scheme, so that either removes what a
// crashed run of the other left.
type lab struct {
	pid    int
	bridge string
	subnet string
	hostIP string
	hosts  []*host
}

// host is one namespace of the lab.
type host struct {
	name, ns, veth, ip string
}

const namePrefix = "fps"

var leftoverName = regexp.MustCompile(`^` + namePrefix + `[nbvp]([0-9]+)`)

// errNoNetns says why namespaces cannot be used here.
var errNoNetns = errors.New("network namespaces unavailable")

// newLab creates one namespace per name. The caller removes it with
// remove, also after an error.
func newLab(names ...string) (*lab, error) {
	switch {
	case runtime.GOOS != "linux":
		return nil, fmt.Errorf("%w: not Linux", errNoNetns)
	case os.Geteuid() != 0:
		return nil, fmt.Errorf("%w: not root", errNoNetns)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: %v", errNoNetns, err)
	}
	removeLeftovers()
	l := &lab{pid: os.Getpid()}
	l.bridge = fmt.Sprintf("%sb%d", namePrefix, l.pid)
	subnet, err := freeSubnet()
	if err != nil {
		return l, err
	}
	l.subnet, l.hostIP = subnet, subnet+".1"
	steps := [][]string{
		{"link", "add", l.bridge, "type", "bridge"},
		{"addr", "add", l.hostIP + "/24", "dev", l.bridge},
		{"link", "set", l.bridge, "up"},
	}
	for i, name := range names {
		h := &host{name: name, ns: fmt.Sprintf("%sn%d-%s", namePrefix, l.pid, name),
			veth: fmt.Sprintf("%sv%di%d", namePrefix, l.pid, i), ip: fmt.Sprintf("%s.%d", subnet, 10+i)}
		peer := fmt.Sprintf("%sp%di%d", namePrefix, l.pid, i)
		l.hosts = append(l.hosts, h)
		steps = append(steps,
			[]string{"netns", "add", h.ns},
			[]string{"link", "add", h.veth, "type", "veth", "peer", "name", peer},
			[]string{"link", "set", peer, "netns", h.ns},
			[]string{"link", "set", h.veth, "master", l.bridge, "up"},
			[]string{"-n", h.ns, "link", "set", peer, "name", "eth0"},
			[]string{"-n", h.ns, "addr", "add", h.ip + "/24", "dev", "eth0"},
			[]string{"-n", h.ns, "link", "set", "eth0", "up"},
			[]string{"-n", h.ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if out, err := ip(s...); err != nil {
			return l, fmt.Errorf("ip %s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	return l, nil
}

// host returns the named host, nil when there is none.
func (l *lab) host(name string) *host {
	for _, h := range l.hosts {
		if h.name == name {
			return h
		}
	}
	return nil
}

func (h *host) addr(port int) string { return fmt.Sprintf("%s:%d", h.ip, port) }

// command is bin args... run in the host's namespace.
func (h *host) command(bin string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.ns, bin}, args...)...)
}

// remove deletes the namespaces, veths and bridge; what is gone already is
// not an error.
func (l *lab) remove() {
	for _, h := range l.hosts {
		_, _ = ip("netns", "del", h.ns)
		_, _ = ip("link", "del", h.veth)
	}
	_, _ = ip("link", "del", l.bridge)
}

func ip(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// removeLeftovers removes the namespaces (killing what still runs in
// them, by pid), veths and bridges of labs whose process is gone.
func removeLeftovers() {
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
			return true
		}
		_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
		return err != nil
	}
	list, _ := ip("netns", "list")
	for _, line := range strings.Split(list, "\n") {
		ns, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !stale(ns) {
			continue
		}
		pids, _ := ip("netns", "pids", ns)
		for _, p := range strings.Fields(pids) {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_, _ = ip("netns", "del", ns)
	}
	links, _ := ip("-o", "link", "show")
	for _, line := range strings.Split(links, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@"); stale(name) {
			_, _ = ip("link", "del", name)
		}
	}
}

// freeSubnet picks a /24 of 10.213.0.0/16 no address or route uses.
func freeSubnet() (string, error) {
	addrs, _ := ip("-4", "-o", "addr", "show")
	routes, _ := ip("-4", "route", "show", "table", "all")
	used := addrs + "\n" + routes
	start := os.Getpid()%200 + 20
	for i := range 230 {
		s := fmt.Sprintf("10.213.%d", (start+i)%230+20)
		if !strings.Contains(used, s+".") {
			return s, nil
		}
	}
	return "", errors.New("no free /24 in 10.213.0.0/16")
}
