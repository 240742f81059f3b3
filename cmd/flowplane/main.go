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

func main() {
	// The engine's live heap is small (batches in flight) and churns fast,
	// so the default GC target of 100% spends a third of the CPU collecting.
	// 400% measured 1.3-1.6x the throughput for tens of MiB more heap under
	// load (bench/). The Hub keeps the default: its live heap grows with the
	// fleet (about 200 MB at 10,000 agents), and 400% made that 1.3-1.7 GiB
	// of RSS. GOGC in the environment still wins.
	if os.Getenv("GOGC") == "" && (len(os.Args) < 2 || os.Args[1] != "hub") {
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
