// Command flowplane is the streaming-data engine node, Agent and Hub in one
// binary. See the README for the roles and their configuration.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/flowplane/flowplane/internal/connect/all"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
