package main

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/flowplane/flowplane/bench/internal/proc"
)

// cpuSeconds is a process's user plus system CPU time so far.
func cpuSeconds(pid int) (float64, error) {
	d, err := proc.CPU(pid)
	return d.Seconds(), err
}

var promLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// sample is one sample of a Prometheus text exposition.
type sample struct {
	labels map[string]string
	value  float64
}

// samples returns the samples of metric name in text.
func samples(text, name string) []sample {
	var out []sample
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		s := sample{labels: map[string]string{}}
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndex(rest, "}")
			if end < 0 {
				continue
			}
			for _, m := range promLabel.FindAllStringSubmatch(rest[1:end], -1) {
				s.labels[m[1]] = m[2]
			}
			rest = rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// sentBytes sums the svc_dataplane_bytes_total{direction="sent"} samples
// of job in a node's exposition.
func sentBytes(text, job string) float64 {
	var sent float64
	for _, s := range samples(text, "svc_dataplane_bytes_total") {
		if s.labels["job"] == job && s.labels["direction"] == "sent" {
			sent += s.value
		}
	}
	return sent
}
