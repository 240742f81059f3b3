// Command flowplane is the streaming-data engine node, Agent and Hub in one
// binary. See the README for the roles and their configuration.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	_ "github.com/flowplane/flowplane/internal/connect/all"
)

// hubMemoryLimit is the Hub's soft memory limit when neither GOGC nor
// GOMEMLIMIT is set (see main).
const hubMemoryLimit = 384 << 20

// nodeMemoryLimit is a node's soft memory limit when GOMEMLIMIT is not set,
// lowered to 3/4 of the cgroup's memory.max when that is lower (see
// nodeLimit).
const nodeMemoryLimit = 1 << 30

func main() {
	// The engine's live heap is small (batches in flight) and churns fast,
	// so the default GC target of 100% spends a third of the CPU collecting.
	// 400% measured 1.3-1.6x the throughput for tens of MiB more heap under
	// load (bench/). GOGC or GOMEMLIMIT in the environment still win.
	//
	// The Hub runs at 400% too, with a soft memory limit: at 400% its desired
	// writes cost about 9% less CPU each (bench/hubwrites, A/B), and
	// 10,000 agents hold 260 MiB of RSS instead of 122 MiB (bench/hubload).
	// The limit makes the collector run more often as the heap nears it, so a
	// larger fleet trades CPU for memory instead of growing the heap to five
	// times its live size.
	//
	// A node gets a soft limit whatever GOGC is: at 400% the garbage of a
	// burst (a flood of connections, a large batch) could grow to five
	// times the live heap before a collection. GOMEMLIMIT, when set, wins.
	hub := len(os.Args) >= 2 && os.Args[1] == "hub"
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(400)
		if hub {
			debug.SetMemoryLimit(hubMemoryLimit)
		}
	}
	if !hub && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(nodeLimit(cgroupMemoryMax()))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// nodeLimit is a node's soft memory limit: nodeMemoryLimit, or 3/4 of the
// cgroup's memory limit cgroupMax (0: none) when that is lower, leaving the rest
// to the stack, the OS buffers and what Go does not count.
func nodeLimit(cgroupMax int64) int64 {
	if cgroupMax > 0 && cgroupMax/4*3 < nodeMemoryLimit {
		return cgroupMax / 4 * 3
	}
	return nodeMemoryLimit
}

// cgroupMemoryMax is the cgroup v2 memory.max of this process, 0 when
// unlimited or unknown.
func cgroupMemoryMax() int64 {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0 // "max"
	}
	return n
}
