package netlab

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

// Lab is one private network of namespaces.
type Lab struct {
	Bridge string
	Subnet string // "10.213.X": the lab's /24 without its last octet
	HostIP string // the bridge's address: the calling process in the lab
	hosts  []*Host
}

// Host is one namespace of the lab.
type Host struct {
	Name string // the caller's name for it
	NS   string // the namespace's name
	Veth string // the veth's end in the root namespace, on the bridge
	IP   string
}

const prefix = "fps"

var leftoverName = regexp.MustCompile(`^` + prefix + `[nbvp]([0-9]+)`)

// ErrUnavailable is wrapped by New's error when namespaces cannot be used
// here (not Linux, not root, no ip(8), namespaces refused, no free /24):
// tests skip on it.
var ErrUnavailable = errors.New("network namespaces unavailable")

// New creates a lab with one namespace per name, first removing what labs
// of dead processes left (logf, when not nil, is told). The caller removes
// the lab with Remove, also after an error when the Lab is not nil.
func New(logf func(format string, args ...any), names ...string) (*Lab, error) {
	switch {
	case runtime.GOOS != "linux":
		return nil, fmt.Errorf("%w: they need Linux", ErrUnavailable)
	case os.Geteuid() != 0:
		return nil, fmt.Errorf("%w: they need root", ErrUnavailable)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: they need ip(8) (iproute2): %v", ErrUnavailable, err)
	}
	RemoveLeftovers(logf)
	pid := os.Getpid()
	probe := fmt.Sprintf("%sn%d-probe", prefix, pid)
	if out, err := run("netns", "add", probe); err != nil {
		return nil, fmt.Errorf("%w: cannot create one: %v: %s", ErrUnavailable, err, out)
	}
	if out, err := run("netns", "del", probe); err != nil {
		return nil, fmt.Errorf("delete namespace %s: %v: %s", probe, err, out)
	}
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	l := &Lab{Bridge: fmt.Sprintf("%sb%d", prefix, pid), Subnet: subnet, HostIP: subnet + ".1"}
	steps := [][]string{
		{"link", "add", l.Bridge, "type", "bridge"},
		{"addr", "add", l.HostIP + "/24", "dev", l.Bridge},
		{"link", "set", l.Bridge, "up"},
	}
	for i, name := range names {
		h := &Host{Name: name, NS: fmt.Sprintf("%sn%d-%s", prefix, pid, name),
			Veth: fmt.Sprintf("%sv%di%d", prefix, pid, i), IP: fmt.Sprintf("%s.%d", subnet, 10+i)}
		peer := fmt.Sprintf("%sp%di%d", prefix, pid, i)
		l.hosts = append(l.hosts, h)
		steps = append(steps,
			[]string{"netns", "add", h.NS},
			[]string{"link", "add", h.Veth, "type", "veth", "peer", "name", peer},
			[]string{"link", "set", peer, "netns", h.NS},
			[]string{"link", "set", h.Veth, "master", l.Bridge, "up"},
			[]string{"-n", h.NS, "link", "set", peer, "name", "eth0"},
			[]string{"-n", h.NS, "addr", "add", h.IP + "/24", "dev", "eth0"},
			[]string{"-n", h.NS, "link", "set", "eth0", "up"},
			[]string{"-n", h.NS, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if out, err := run(s...); err != nil {
			return l, fmt.Errorf("ip %s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	return l, nil
}

// Host returns the named host, nil when there is none.
func (l *Lab) Host(name string) *Host {
	for _, h := range l.hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Addr is host:port on the host's lab address.
func (h *Host) Addr(port int) string { return fmt.Sprintf("%s:%d", h.IP, port) }

// Command is bin args... run in the host's namespace.
func (h *Host) Command(bin string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.NS, bin}, args...)...)
}

// Remove deletes the namespaces, veths and bridge; what is gone already is
// not an error.
func (l *Lab) Remove() {
	for _, h := range l.hosts {
		_, _ = run("netns", "del", h.NS)
		_, _ = run("link", "del", h.Veth)
	}
	_, _ = run("link", "del", l.Bridge)
}

func run(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// RemoveLeftovers removes what labs of processes that no longer run left
// (and any of this process): their namespaces, killing what still runs in
// them by pid, their veths and bridges. Labs of other live processes are
// left alone.
func RemoveLeftovers(logf func(format string, args ...any)) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
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
	list, _ := run("netns", "list")
	for _, line := range strings.Split(list, "\n") {
		ns, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !stale(ns) {
			continue
		}
		pids, _ := run("netns", "pids", ns)
		for _, p := range strings.Fields(pids) {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		logf("removing namespace %s left by an earlier run", ns)
		_, _ = run("netns", "del", ns)
	}
	links, _ := run("-o", "link", "show")
	for _, line := range strings.Split(links, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@"); stale(name) {
			logf("removing link %s left by an earlier run", name)
			_, _ = run("link", "del", name)
		}
	}
}

// freeSubnet picks a /24 of 10.213.0.0/16 that no address or route of the
// root namespace uses yet, starting from one derived from the pid.
func freeSubnet() (string, error) {
	addrs, _ := run("-4", "-o", "addr", "show")
	routes, _ := run("-4", "route", "show", "table", "all")
	used := addrs + "\n" + routes
	start := os.Getpid()%200 + 20
	for i := range 230 {
		s := fmt.Sprintf("10.213.%d", (start+i)%230+20)
		if !strings.Contains(used, s+".") {
			return s, nil
		}
	}
	return "", fmt.Errorf("%w: no free /24 in 10.213.0.0/16", ErrUnavailable)
}
