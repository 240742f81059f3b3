package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/goccy/go-json"
)

// benchWindow runs the keyed tumbling-window count through the kernel at
// each parallelism, then the same aggregation as a hand-written loop.
func benchWindow(work string, events int64, pars []int) error {
	fmt.Printf("keyed tumbling-window count, %d events, 100,000 keys, 1 s windows, checkpoint every 10 s to file://\n", events)
	var p *job.Plan
	for i, par := range pars {
		dir := filepath.Join(work, fmt.Sprintf("window-%d", i))
		var err error
		p, err = plan(filepath.Join(templates, "window.yaml"), map[string]string{
			"EVENTS": strconv.FormatInt(events, 10), "PARALLELISM": strconv.Itoa(par), "SINK": "drop",
			"CHECKPOINTS": "file://" + filepath.Join(dir, "checkpoints"),
		})
		if err != nil {
			return err
		}
		r, err := run(p, filepath.Join(dir, "state"))
		if err != nil {
			return err
		}
		fmt.Printf("  kernel, parallelism %d: %.0f events/s (%.2f s wall, %.2f s CPU, %.0f events per CPU-second)\n",
			par, r.rate(events), r.wall.Seconds(), r.cpu.Seconds(), r.perCore(events))
	}
	n, r, err := handLoop(p.Operators[0].Source.Config)
	if err != nil {
		return err
	}
	fmt.Printf("  hand-written single-goroutine loop: %.0f events/s (%d window results)\n", r.rate(events), n)
	return nil
}

// handLoop is the same aggregation written by hand on one goroutine: read
// the generate input's batches, decode each click, count it in its user's
// 1-second window, and emit (encode) a window's counts once the
// watermark (max timestamp seen - 1) passes its end.
func handLoop(conf map[string]any) (int, result, error) {
	in, err := component.Default.NewInput("generate", conf, component.Resources{})
	if err != nil {
		return 0, result{}, err
	}
	ctx := context.Background()
	if err := in.Connect(ctx); err != nil {
		return 0, result{}, err
	}
	defer in.Close(ctx)
	type wk struct {
		user  string
		start int64
	}
	const size = 1000
	counts := map[wk]int64{}
	open := map[int64][]string{} // window start -> users
	emitted := 0
	var maxTS int64 = -1 << 63
	var out []byte
	fire := func(upTo int64) {
		for start, users := range open {
			if start+size-1 > upTo {
				continue
			}
			for _, u := range users {
				k := wk{u, start}
				out, _ = json.Marshal(map[string]any{"key": u, "window_start": start, "window_end": start + size, "clicks": counts[k]})
				delete(counts, k)
				emitted++
			}
			delete(open, start)
		}
	}
	c0, t0 := cpuTime(), time.Now()
	for {
		b, ack, err := in.Read(ctx)
		if errors.Is(err, message.ErrEndOfInput) {
			break
		}
		if err != nil {
			return 0, result{}, err
		}
		for i := range b.Messages {
			var v struct {
				User string `json:"user"`
				TS   int64  `json:"ts"`
			}
			p, _ := b.Messages[i].Payload()
			if err := json.Unmarshal(p, &v); err != nil {
				return 0, result{}, err
			}
			k := wk{v.User, v.TS - v.TS%size}
			if counts[k] == 0 {
				open[k.start] = append(open[k.start], v.User)
			}
			counts[k]++
			maxTS = max(maxTS, v.TS)
		}
		_ = ack(ctx, nil)
		fire(maxTS - 1)
	}
	fire(1<<63 - 1)
	_ = out
	return emitted, result{wall: time.Since(t0), cpu: cpuTime() - c0}, nil
}
