package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/hub"
)

// hubTokenUsage is the help of `flowplane hub token create`.
const hubTokenUsage = `flowplane hub token create — make a named operator token.

Usage:
  flowplane hub token create --name NAME --role viewer|operator|admin [--scope SCOPE]... [--expires DURATION]

Prints the new token (keep it: it is shown once) and the line to add to the
file named by ` + hub.EnvTokensFile + `, which holds only the token's SHA-256.
The Hub reloads the file when it changes.

Flags:
  --name NAME         the principal's name, the actor of its audit rows
  --role ROLE         viewer (reads), operator (lifecycle), admin (everything)
  --scope SCOPE       narrow the token (repeatable): node:<id>, stream:<node>/<id>,
                      job:<id>, rollout:<id>; ids may be globs (job:etl-*)
  --expires DURATION  refuse the token after this long (like 720h)
`

// scopeFlags collects repeated --scope values.
type scopeFlags []string

func (s *scopeFlags) String() string     { return strings.Join(*s, ",") }
func (s *scopeFlags) Set(v string) error { *s = append(*s, v); return nil }

// runHubToken runs `flowplane hub token ...`.
func runHubToken(args []string, now time.Time, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "create" {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
			fmt.Fprint(stdout, hubTokenUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "flowplane hub token: want the subcommand create\n\n%s", hubTokenUsage)
		return exitUsage
	}
	fs := flag.NewFlagSet("flowplane hub token create", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("name", "", "")
	role := fs.String("role", "", "")
	expires := fs.Duration("expires", 0, "")
	var scopes scopeFlags
	fs.Var(&scopes, "scope", "")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, hubTokenUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "flowplane hub token create: %s\n\n%s", usageError(fs, err), hubTokenUsage)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flowplane hub token create: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	tok, sum, err := access.NewToken()
	if err != nil {
		fmt.Fprintf(stderr, "flowplane hub token create: %v\n", err)
		return exitFailed
	}
	nt := access.NamedToken{Name: *name, SHA256: sum}
	if *expires < 0 {
		fmt.Fprintln(stderr, "flowplane hub token create: --expires must be positive")
		return exitUsage
	}
	if *expires > 0 {
		nt.Expires = now.Add(*expires).UTC().Truncate(time.Second)
	}
	if nt.Role, err = access.ParseRole(*role); err == nil {
		nt.Scopes, err = access.ParseScopes(scopes)
	}
	if err == nil {
		// The line must read back as the Hub will read it.
		_, err = access.ParseTokens([]byte(nt.Line()))
	}
	if err != nil {
		fmt.Fprintf(stderr, "flowplane hub token create: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "token: %s\n\nAdd this line to the file named by %s (it holds only the SHA-256):\n%s\n", tok, hub.EnvTokensFile, nt.Line())
	return exitOK
}
