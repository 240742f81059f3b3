package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// cpuSeconds is a process's user plus system CPU time so far, from
// /proc/<pid>/stat (fields 14 and 15).
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields count from after
	// its closing parenthesis, where field 3 starts.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return float64(utime+stime) / clockTicks, nil
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
