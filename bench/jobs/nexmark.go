package main

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// benchNexmark runs each Nexmark query at each parallelism and prints
// events/s and events per CPU-second (per core).
func benchNexmark(work string, events int64, pars []int, queries []string) error {
	fmt.Printf("Nexmark, %d events per run, drop sink\n", events)
	fmt.Printf("  %-5s %-12s %14s %20s %10s\n", "query", "parallelism", "events/s", "events/s per core", "CPU s")
	for _, q := range queries {
		for _, par := range pars {
			p, err := plan(filepath.Join(templates, "nexmark", q+".yaml"), map[string]string{
				"EVENTS": strconv.FormatInt(events, 10), "PARALLELISM": strconv.Itoa(par), "SINK": "drop",
			})
			if err != nil {
				return err
			}
			r, err := run(p, filepath.Join(work, q, strconv.Itoa(par)))
			if err != nil {
				return fmt.Errorf("%s at parallelism %d: %w", q, par, err)
			}
			fmt.Printf("  %-5s %-12d %14.0f %20.0f %10.2f\n", q, par, r.rate(events), r.perCore(events), r.cpu.Seconds())
		}
	}
	return nil
}
