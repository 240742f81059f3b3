// Command brokers measures the broker connectors end to end: flowplane
// and, when its binary is given, Benthos 4.x side by side, each run as a
// child process against brokers started inside this process on 127.0.0.1
// (a kfake Kafka cluster and an embedded nats-server with JetStream on a
// temporary file store).
//
// For every case it readies the broker (preloads -records 100-byte JSON
// records once per input case, a fresh consumer group, durable, topic or
// subject per run), writes each engine's configuration, starts the engine
// and counts the records done AT THE BROKER — committed consumer-group
// offsets, JetStream ack floors, records in a topic or stream, messages on
// a subscribed subject — until all -records are done or -timeout passes.
// It then reads the child's CPU time (/proc, or rusage when the child has
// already exited) and peak RSS (VmHWM, or rusage when the child has
// exited), stops it, and prints one row.
//
// Usage (see bench/README.md):
//
//	make bench-brokers                                  # builds bench/results/flowplane first
//	go run ./bench/brokers -flowplane bench/results/flowplane -benthos /path/to/benthos -records 1000000
//	go run ./bench/brokers -h                           # every flag
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the command line settings shared by every case.
type options struct {
	flowplane  string
	benthos    string
	records    int64
	batch      int
	partitions int
	runs       int
	timeout    time.Duration
	cases      []string
	dir        string
	keep       bool
}

func main() {
	var (
		o     options
		cases string
	)
	flag.StringVar(&o.flowplane, "flowplane", "bench/results/flowplane", "flowplane binary (make bench-brokers builds it there)")
	flag.StringVar(&o.benthos, "benthos", "", "Benthos 4.x binary; its rows are skipped when empty or absent")
	flag.Int64Var(&o.records, "records", 1_000_000, "records per run (100-byte JSON each)")
	flag.IntVar(&o.batch, "batch", 1000, "batch size given to both engines where their configurations have one")
	flag.IntVar(&o.partitions, "partitions", 4, "partitions of every Kafka topic")
	flag.IntVar(&o.runs, "runs", 1, "runs of every case and engine")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Second, "upper bound on one run (start to the last record counted)")
	flag.StringVar(&cases, "cases", strings.Join(caseNames(), ","), "comma-separated cases to run")
	flag.StringVar(&o.dir, "dir", "", "directory for configurations, logs and the JetStream store (default: a new temporary directory)")
	flag.BoolVar(&o.keep, "keep", false, "keep -dir (configurations and engine logs) after the run")
	flag.Parse()
	o.cases = strings.Split(cases, ",")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "brokers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (err error) {
	if o.records < 1 || o.batch < 1 || o.partitions < 1 || o.runs < 1 || o.timeout <= 0 {
		return errors.New("need -records, -batch, -partitions, -runs >= 1 and -timeout > 0")
	}
	for _, c := range o.cases {
		if !slices.Contains(caseNames(), c) {
			return fmt.Errorf("-cases: unknown case %q (known: %s)", c, strings.Join(caseNames(), ", "))
		}
	}
	if _, err := os.Stat(o.flowplane); err != nil {
		return fmt.Errorf("-flowplane: %w (build it with `make bench-brokers` or `go build -o %s ./cmd/flowplane`)", err, o.flowplane)
	}
	engines := []engine{flowplaneEngine(o.flowplane)}
	benthosNote := "Benthos: not given (-benthos), its rows are skipped"
	if o.benthos != "" {
		if _, err := os.Stat(o.benthos); err != nil {
			benthosNote = fmt.Sprintf("Benthos: %s is absent, its rows are skipped", o.benthos)
		} else {
			engines = append(engines, benthosEngine(o.benthos))
			benthosNote = "Benthos: " + benthosVersion(ctx, o.benthos)
		}
	}

	if o.dir == "" {
		d, err := os.MkdirTemp("", "bench-brokers-")
		if err != nil {
			return err
		}
		o.dir = d
		defer func() {
			// A failed run keeps its engine's log for the reader.
			if !o.keep && err == nil {
				os.RemoveAll(d)
			}
		}()
	}
	if o.dir, err = filepath.Abs(o.dir); err != nil {
		return err
	}

	fmt.Printf("broker connectors: %d records of 100 bytes per run, batch %d, %d Kafka partitions, timeout %s per run\n",
		o.records, o.batch, o.partitions, o.timeout)
	fmt.Printf("machine: %d cores (%s); the brokers and this harness run in one process beside the engine and share those cores\n",
		runtime.NumCPU(), runtime.Version())
	fmt.Println(benthosNote)

	b, err := startBrokers(ctx, o)
	if err != nil {
		return err
	}
	defer b.close()

	var rows []result
	for _, sc := range scenarios() {
		if !slices.Contains(o.cases, sc.name) {
			continue
		}
		if sc.preload != nil {
			t0 := time.Now()
			if err := sc.preload(ctx, b); err != nil {
				return fmt.Errorf("%s: preload: %w", sc.name, err)
			}
			fmt.Printf("%s: preloaded %d records in %s\n", sc.name, o.records, time.Since(t0).Round(time.Millisecond))
		}
		for _, eng := range engines {
			for i := 1; i <= o.runs; i++ {
				r := measure(ctx, b, sc, eng, i)
				rows = append(rows, r)
				fmt.Println(r.line())
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
	}
	fmt.Println()
	printTable(os.Stdout, rows)
	if o.keep {
		fmt.Println("configurations and engine logs kept in", o.dir)
	}
	for _, r := range rows {
		if r.err != nil {
			return fmt.Errorf("some runs did not finish; configurations and logs are in %s", o.dir)
		}
	}
	return nil
}
