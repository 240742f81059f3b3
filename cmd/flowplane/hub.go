package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/flowplane/flowplane/internal/hub"
)

// hubUsage is the help of flowplane hub: its flags and every environment
// variable it reads (docs/hub-api.md has the details).
var hubUsage = `flowplane hub — the fleet's control plane.

Usage:
  flowplane hub [--address host:port] [--storage file.db]

Flags:
  --address host:port   listen address (overrides ` + hub.EnvAddress + `)
  --storage file.db     SQLite file of all durable state (overrides ` + hub.EnvStorage + `)

Environment (tokens only from here, never from flags):
  ` + hub.EnvAddress + `        listen address (default ` + hub.DefaultAddress + `)
  ` + hub.EnvStorage + `        SQLite file; required unless insecure local
  ` + hub.EnvOperatorToken + `     bearer token of the operator API; required unless insecure local
  ` + hub.EnvNodeToken + `         Agent registration token (the nodes' node_token); required unless insecure local
                         tokens: at least 16 characters, and the two must differ
  ` + hub.EnvTLSCert + `       PEM certificate chain to serve HTTPS with (with ` + hub.EnvTLSKey + `);
  ` + hub.EnvTLSKey + `        its private key; both reloaded when the files change
  ` + hub.EnvInsecureLocal + ` 1: local development on a loopback address, storage and tokens optional
  ` + hub.EnvAPIPrefix + `     prefix of the operator and agent APIs (default /api/v1)
  ` + hub.EnvCORSOrigins + `   comma-separated browser origins allowed to call the API
  ` + hub.EnvIntentTTL + `     how long an accepted intent may wait for its node (default 24h)
`

// runHub runs the Hub until ctx ends. Its settings come from the
// environment (SVC_HUB_*; tokens only from there), flags mirror the
// address and storage path.
func runHub(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("flowplane hub", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	address := fs.String("address", "", "listen address (overrides "+hub.EnvAddress+")")
	storage := fs.String("storage", "", "SQLite file (overrides "+hub.EnvStorage+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, hubUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "flowplane hub: %v\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flowplane hub: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	settings, warnings, err := hub.SettingsFromEnv(os.LookupEnv, *address, *storage)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane hub: %v\n", err)
		return exitFailed
	}
	log := slog.New(slog.NewTextHandler(stdout, nil))
	for _, w := range warnings {
		log.Error("insecure local mode: " + w)
	}
	h, err := hub.New(ctx, hub.Options{Settings: settings, Logger: log, Version: buildVersion()})
	if err != nil {
		log.Error("hub start-up failed", "err", err)
		return exitFailed
	}
	defer h.Close()
	if err := h.Run(ctx); err != nil {
		log.Error("hub stopped with an error", "err", err)
		return exitFailed
	}
	log.Info("hub stopped")
	return exitOK
}
