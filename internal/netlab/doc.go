// Package netlab builds a private network of Linux network namespaces on
// one machine, for tests and benchmarks that need several hosts: a bridge
// in the root namespace carries the lab's /24 (the calling process is .1 on
// it), and each host is a namespace with a veth into the bridge, its own
// address and lo up. Processes run in a host through `ip netns exec`, which
// execs in place, so the child's pid is the binary's and SIGKILL reaches
// the real process.
//
// Every name starts with "fps" and the creating process's pid
// (fpsn<pid>-<host> namespaces, fpsb<pid> bridges, fpsv<pid>i<n> and
// fpsp<pid>i<n> veth ends), so that a later lab recognises and removes the
// leftovers of a process that died. Only the lab's own addresses are
// traffic targets.
package netlab
