// Command pgdev runs a throwaway PostgreSQL server to try the Hub on
// (README, "A highly available Hub"): Debian's binaries (package
// postgresql) in a temporary directory, on 127.0.0.1 and a free port. It
// creates the empty database hub, prints its URL on stdout and runs until
// Ctrl-C, then stops the server and removes its data.
//
//	go run ./internal/pgtest/pgdev
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/flowplane/flowplane/internal/pgtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := pgtest.Launch()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgdev:", err)
		os.Exit(1)
	}
	if err := s.ExecErr("CREATE DATABASE hub"); err != nil {
		s.Close()
		fmt.Fprintln(os.Stderr, "pgdev:", err)
		os.Exit(1)
	}
	fmt.Println(s.DatabaseURI("hub"))
	fmt.Fprintln(os.Stderr, "pgdev: PostgreSQL runs until Ctrl-C, which removes its data")
	<-ctx.Done()
	s.Close()
}
