package main

import "testing"

// TestNodeLimit: a node's soft memory limit is nodeMemoryLimit, or 3/4 of
// a lower cgroup memory limit.
func TestNodeLimit(t *testing.T) {
	for _, c := range []struct{ cgroup, want int64 }{
		{0, nodeMemoryLimit},
		{8 << 30, nodeMemoryLimit},
		{1 << 30, 768 << 20},
		{512 << 20, 384 << 20},
	} {
		if got := nodeLimit(c.cgroup); got != c.want {
			t.Errorf("nodeLimit(%d) = %d, want %d", c.cgroup, got, c.want)
		}
	}
}
