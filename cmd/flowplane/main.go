// Command flowplane is the streaming-data engine node, Agent and Hub in one
// binary. See the README for the roles and their configuration.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	_ "github.com/flowplane/flowplane/internal/connect/all"
)

// hubMemoryLimit is the Hub's soft memory limit when neither GOGC nor
// GOMEMLIMIT is set (see main).
const hubMemoryLimit = 384 << 20

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
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(400)
		if len(os.Args) >= 2 && os.Args[1] == "hub" {
			debug.SetMemoryLimit(hubMemoryLimit)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
