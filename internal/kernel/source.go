package kernel

import (
	"context"
	"encoding/json"
	"math"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/operator"
)

// readResult is one Read of a source and the position right after it.
type readResult struct {
	b   message.Batch
	ack message.AckFunc
	pos []byte // nil unless the input is Replayable
	err error
	// clock is set for a Clocked input: its watermark and idleness after
	// this Read.
	clock *sourceClock
}

// Clocked is a source input that sets its subtask's watermark and
// idleness itself, instead of the time policy's strategy and idle timeout:
// the in-memory source of package testsuite, whose event time moves only
// when a test says so. The source task calls Clock from its reader right
// after each Read (as it calls Position), and applies the result once the
// batch read is processed, before anything else the task does.
type Clocked interface {
	component.Input
	// Clock is the watermark in ms (operator.NoTime: none yet) and
	// whether the source is idle, as of the last Read.
	Clock() (watermark int64, idle bool)
}

type sourceClock struct {
	wm   int64
	idle bool
}

// readLoop reads in until ctx ends or the input fails or ends, handing each
// batch over on out. out is small, so a task that does not take batches
// (back-pressure) stops the reading.
func readLoop(ctx context.Context, in component.Input, out chan<- readResult) {
	rep, _ := in.(component.Replayable)
	clk, _ := in.(Clocked)
	for {
		b, ack, err := in.Read(ctx)
		rr := readResult{b: b, ack: ack, err: err}
		if err == nil && rep != nil {
			rr.pos, rr.err = rep.Position()
		}
		if err == nil && clk != nil {
			wm, idle := clk.Clock()
			rr.clock = &sourceClock{wm: wm, idle: idle}
		}
		select {
		case out <- rr:
		case <-ctx.Done():
			return
		}
		if rr.err != nil {
			return
		}
	}
}

// watermarkGen is a source subtask's watermark generator: it stamps records
// with their event time (or the processing time), tracks the highest event
// time seen and how long the source went without records, and derives the
// subtask's watermark and idleness from them.
type watermarkGen struct {
	event            bool
	field            string
	monotonous       bool
	outOfOrdernessMs int64
	idleTimeoutMs    int64

	maxSeen  int64 // highest event time seen; operator.NoTime before any
	lastData int64 // processing time of the last record, ms
	idle     bool
}

func newWatermarkGen(tp *job.TimePolicy, now int64) *watermarkGen {
	g := &watermarkGen{maxSeen: operator.NoTime, lastData: now}
	if tp != nil && tp.Mode == "event_time" {
		g.event = true
		g.field = tp.TimestampField
		g.monotonous = tp.Strategy == "monotonous"
		g.outOfOrdernessMs = tp.OutOfOrdernessMs
		g.idleTimeoutMs = tp.IdleTimeoutMs
	}
	return g
}

// records turns a batch into records, dropping those without a usable event
// time; it returns how many it dropped.
func (g *watermarkGen) records(b message.Batch, now int64) ([]operator.Record, int) {
	recs := make([]operator.Record, 0, len(b.Messages))
	dropped := 0
	for i := range b.Messages {
		m := &b.Messages[i]
		r := operator.Record{Time: now}
		if m.HasStructured() {
			r.Value, _ = m.Structured()
		} else {
			r.Value, _ = m.Payload()
		}
		if g.event {
			ts, ok := eventTime(r.Data(), g.field)
			if !ok {
				dropped++
				continue
			}
			r.Time = ts
			if ts > g.maxSeen {
				g.maxSeen = ts
			}
		}
		recs = append(recs, r)
	}
	if len(b.Messages) > 0 {
		g.lastData = now
		g.idle = false
	}
	return recs, dropped
}

// watermark is the source subtask's current watermark.
func (g *watermarkGen) watermark(now int64) int64 {
	if !g.event {
		return now - 1
	}
	if g.maxSeen == operator.NoTime {
		return operator.NoTime
	}
	if g.monotonous {
		return g.maxSeen - 1
	}
	return g.maxSeen - g.outOfOrdernessMs - 1
}

// becameIdle reports, once, that the source has had no records for its
// idle timeout.
func (g *watermarkGen) becameIdle(now int64) bool {
	if g.idleTimeoutMs <= 0 || g.idle || now-g.lastData < g.idleTimeoutMs {
		return false
	}
	g.idle = true
	return true
}

// eventTime reads the top-level field of v: a number of ms since the epoch
// or an RFC 3339 string.
func eventTime(v any, field string) (int64, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return 0, false
	}
	switch x := m[field].(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, false
		}
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			f, err := x.Float64()
			return int64(f), err == nil
		}
		return n, true
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return 0, false
		}
		return t.UnixMilli(), true
	}
	return 0, false
}
