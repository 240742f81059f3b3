package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/telemetry"
)

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
			fmt.Fprint(stdout, hubUsage())
			return exitOK
		}
		fmt.Fprintf(stderr, "flowplane hub: %s\n\n%s", usageError(fs, err), hubUsage())
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flowplane hub: unexpected argument %q\n\n%s", fs.Arg(0), hubUsage())
		return exitUsage
	}
	settings, warnings, err := hub.SettingsFromEnv(os.LookupEnv, *address, *storage)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane hub: %v\n", err)
		return exitFailed
	}
	// The Hub's own credentials never reach its log.
	secrets := config.NewRedactor(settings.OperatorToken, settings.NodeToken)
	log := slog.New(telemetry.RedactingHandler(slog.NewTextHandler(telemetry.RedactingWriter(stdout, secrets), nil), secrets))
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
