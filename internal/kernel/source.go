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
}

// readLoop reads in until ctx ends or the input fails or ends, handing each
// batch over on out. out is small, so a task that does not take batches
// (back-pressure) stops the reading.
func readLoop(ctx context.Context, in component.Input, out chan<- readResult) {
	rep, _ := in.(component.Replayable)
	for {
		b, ack, err := in.Read(ctx)
		rr := readResult{b: b, ack: ack, err: err}
		if err == nil && rep != nil {
			rr.pos, rr.err = rep.Position()
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

// clock is a source subtask's event-time and watermark policy.
type clock struct {
	event       bool
	field       string
	monotonous  bool
	ooo         int64
	idleTimeout int64

	maxSeen  int64 // highest event time seen; operator.NoTime before any
	lastData int64 // processing time of the last record, ms
	idle     bool
}

func newClock(tp *job.TimePolicy, now int64) *clock {
	c := &clock{maxSeen: operator.NoTime, lastData: now}
	if tp != nil && tp.Mode == "event_time" {
		c.event = true
		c.field = tp.TimestampField
		c.monotonous = tp.Strategy == "monotonous"
		c.ooo = tp.OutOfOrdernessMs
		c.idleTimeout = tp.IdleTimeoutMs
	}
	return c
}

// records turns a batch into records, dropping those without a usable event
// time; it returns how many it dropped.
func (c *clock) records(b message.Batch, now int64) ([]operator.Record, int) {
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
		if c.event {
			ts, ok := eventTime(r.Data(), c.field)
			if !ok {
				dropped++
				continue
			}
			r.Time = ts
			if ts > c.maxSeen {
				c.maxSeen = ts
			}
		}
		recs = append(recs, r)
	}
	if len(b.Messages) > 0 {
		c.lastData = now
		c.idle = false
	}
	return recs, dropped
}

// watermark is the source subtask's current watermark.
func (c *clock) watermark(now int64) int64 {
	if !c.event {
		return now - 1
	}
	if c.maxSeen == operator.NoTime {
		return operator.NoTime
	}
	if c.monotonous {
		return c.maxSeen - 1
	}
	return c.maxSeen - c.ooo - 1
}

// becameIdle reports, once, that the source has had no records for its
// idle timeout.
func (c *clock) becameIdle(now int64) bool {
	if c.idleTimeout <= 0 || c.idle || now-c.lastData < c.idleTimeout {
		return false
	}
	c.idle = true
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
