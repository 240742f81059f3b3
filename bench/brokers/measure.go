package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"
)

const (
	// pollEvery is how often the harness counts at the broker.
	pollEvery = 25 * time.Millisecond
	// probeTimeout bounds one count (and one cleanup) at the broker.
	probeTimeout = 5 * time.Second
	// exitGrace is how long the broker count may still grow after the
	// engine exited by itself (a finite input's last writes).
	exitGrace = 3 * time.Second
	// stopGrace is how long a stopped engine may take before SIGKILL.
	stopGrace = 10 * time.Second
)

// result is one run of one case by one engine.
type result struct {
	scenario, engine string
	run              int
	records, done    int64
	wall             time.Duration // engine start to the last record counted
	active           time.Duration // first record counted to the last
	cpu              time.Duration // user+system CPU of the engine until then
	peakRSS          int64         // bytes
	err              error
	log              string
}

func (r result) rate(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(r.done) / d.Seconds()
}

func (r result) line() string {
	if r.err != nil {
		return fmt.Sprintf("%s/%s run %d: %d of %d records: %v (log: %s)", r.scenario, r.engine, r.run, r.done, r.records, r.err, r.log)
	}
	return fmt.Sprintf("%s/%s run %d: %d records in %s, %.0f msg/s, CPU %.2fs, peak RSS %d MiB",
		r.scenario, r.engine, r.run, r.done, r.wall.Round(time.Millisecond), r.rate(r.wall), r.cpu.Seconds(), r.peakRSS>>20)
}

// measure runs eng on one run of sc and counts at the broker until every
// record is done, the run's timeout passes, or the engine fails.
func measure(ctx context.Context, b *brokers, sc scenario, eng engine, run int) result {
	id := fmt.Sprintf("%s-%s-%d", sc.name, eng.name, run)
	r := result{scenario: sc.name, engine: eng.name, run: run, records: b.o.records}
	p, count, cleanup, err := sc.prepare(ctx, b, id)
	if err != nil {
		r.err = fmt.Errorf("prepare: %w", err)
		return r
	}
	defer cleanup()

	conf := filepath.Join(b.o.dir, id+".yaml")
	state := filepath.Join(b.o.dir, id+".state")
	r.log = filepath.Join(b.o.dir, id+".log")
	if err := os.WriteFile(conf, []byte(eng.config(sc, p)), 0o644); err != nil {
		r.err = err
		return r
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		r.err = err
		return r
	}
	logf, err := os.Create(r.log)
	if err != nil {
		r.err = err
		return r
	}
	defer logf.Close()

	cmd := exec.Command(eng.bin, eng.args(conf, state)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		r.err = err
		return r
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var (
		first, last time.Time
		exitedAt    time.Time
		exitErr     error
		gone        bool
		cpuAtDone   time.Duration
		cpuOK       bool
		rssAtDone   int64
		rssOK       bool
	)
	deadline := time.NewTimer(b.o.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			r.err = ctx.Err()
			break loop
		case <-deadline.C:
			r.err = fmt.Errorf("timed out after %s", b.o.timeout)
			break loop
		case exitErr = <-exited:
			gone, exitedAt = true, time.Now()
			if exitErr != nil {
				r.err = fmt.Errorf("engine exited: %w", exitErr)
				break loop
			}
			continue
		case <-tick.C:
		}
		if !gone {
			// VmHWM only grows; sampled while the engine lives, since an
			// engine whose input ends exits before the harness stops it.
			if v, ok := procPeakRSS(cmd.Process.Pid); ok {
				rssAtDone, rssOK = max(rssAtDone, v), true
			}
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		n, err := count(pctx)
		cancel()
		now := time.Now()
		if err != nil {
			r.err = fmt.Errorf("counting at the broker: %w", err)
			break
		}
		if n > 0 && first.IsZero() {
			first = now
		}
		if n > r.done {
			r.done, last = n, now
		}
		if r.done >= r.records {
			if !gone {
				cpuAtDone, cpuOK = procCPU(cmd.Process.Pid)
				if v, ok := procPeakRSS(cmd.Process.Pid); ok {
					rssAtDone, rssOK = max(rssAtDone, v), true
				}
			}
			break
		}
		if gone && now.Sub(exitedAt) > exitGrace {
			r.err = errors.New("engine exited before every record was done")
			break
		}
	}
	if r.err == nil && r.done > r.records {
		// More than was sent: duplicates, which the rate must not count.
		r.err = fmt.Errorf("%d records counted, more than the %d sent", r.done, r.records)
	}
	r.wall, r.active = last.Sub(start), last.Sub(first)

	if !gone {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopGrace):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.peakRSS = ru.Maxrss << 10 // KiB on Linux
		if !cpuOK {
			r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	if cpuOK {
		r.cpu = cpuAtDone
	}
	if rssOK {
		r.peakRSS = rssAtDone
	}
	return r
}

func printTable(w io.Writer, rows []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tengine\trun\trecords\twall s\tmsg/s\tmsg/s after 1st\tCPU s\tmsg/CPU-s\tpeak RSS MiB\t")
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t-\t-\t-\t-\t-\t-\t\n", r.scenario, r.engine, r.run, r.done, r.records)
			continue
		}
		after := "-" // every record was counted at the first count
		if r.active > 0 {
			after = fmt.Sprintf("%.0f", r.rate(r.active))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%.0f\t%s\t%.2f\t%.0f\t%d\t\n",
			r.scenario, r.engine, r.run, r.done, r.wall.Seconds(), r.rate(r.wall), after,
			r.cpu.Seconds(), r.rate(r.cpu), r.peakRSS>>20)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "wall: engine start to the last record counted at the broker (start-up included); "+
		"msg/s after 1st: from the first record counted; CPU: the engine's user+system time until the last record; "+
		"input cases count acknowledged records (committed offsets, JetStream ack floor), output cases records at the broker.")
}
