package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/flowplane/flowplane/internal/hub/store"
)

// hubMigrateUsage is the help of `flowplane hub migrate`.
const hubMigrateUsage = `flowplane hub migrate — copy a Hub's SQLite database into PostgreSQL.

Usage:
  flowplane hub migrate --from hub.db --to postgres://USER:PASSWORD@HOST:5432/DB

Stop the Hub first: the copy refuses a SQLite file a running Hub holds
(its lock file). The target database must be empty; the copy makes its
schema, copies every table with its ids in one transaction, and checks each
table's row count and digest before committing. Then start the Hub with
SVC_HUB_STORAGE set to the postgres:// URL.

Flags:
  --from FILE   the stopped Hub's SQLite file (its SVC_HUB_STORAGE)
  --to URL      the empty PostgreSQL database (postgres:// or postgresql://)
`

// runHubMigrate runs `flowplane hub migrate ...`.
func runHubMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("flowplane hub migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	from := fs.String("from", "", "")
	to := fs.String("to", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, hubMigrateUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "flowplane hub migrate: %s\n\n%s", usageError(fs, err), hubMigrateUsage)
		return exitUsage
	}
	if fs.NArg() > 0 || *from == "" || !store.IsPostgres(*to) {
		fmt.Fprintf(stderr, "flowplane hub migrate: want --from FILE and --to postgres://...\n\n%s", hubMigrateUsage)
		return exitUsage
	}
	tables, err := store.Transfer(ctx, *from, *to)
	switch {
	case errors.Is(err, store.ErrInUse):
		fmt.Fprintf(stderr, "flowplane hub migrate: stop the Hub first: %v\n", err)
		return exitFailed
	case err != nil:
		fmt.Fprintf(stderr, "flowplane hub migrate: %v\n", err)
		return exitFailed
	}
	var rows int64
	for _, t := range tables {
		fmt.Fprintf(stdout, "%-20s %8d rows  sha256 %s\n", t.Table, t.Rows, t.Digest)
		rows += t.Rows
	}
	fmt.Fprintf(stdout, "copied %d tables, %d rows; start the Hub with SVC_HUB_STORAGE set to the postgres:// URL\n", len(tables), rows)
	return exitOK
}
