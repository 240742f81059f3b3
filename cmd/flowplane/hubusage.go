package main

import (
	"fmt"
	"strings"

	"github.com/flowplane/flowplane/internal/hub"
)

// hubUsage is the help of `flowplane hub`: its flags and every environment
// variable the Hub reads.
func hubUsage() string {
	var b strings.Builder
	b.WriteString(`flowplane hub — the fleet's desired-state control plane.

Usage:
  flowplane hub [--address host:port] [--storage file.db]
  flowplane hub token create --name NAME --role ROLE [--scope SCOPE]...   (see its --help)
  flowplane hub migrate --from hub.db --to postgres://...                 (see its --help)

Flags:
  --address host:port   listen address (overrides ` + hub.EnvAddress + `)
  --storage file.db     SQLite file or postgres:// URL of the durable state (overrides ` + hub.EnvStorage + `)

Environment (tokens are read only from here, never from flags):
`)
	vars := hub.EnvVars()
	width := 0
	for _, v := range vars {
		width = max(width, len(v.Name))
	}
	for _, v := range vars {
		line := v.Meaning
		if v.Default != "" {
			line += " (default " + v.Default + ")"
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", width, v.Name, line)
	}
	b.WriteString("\nExit status: 0 stopped by a signal, 1 refused to start or failed, 2 usage error.\n")
	return b.String()
}
