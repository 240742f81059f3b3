package buffer

import (
	"time"

	"github.com/flowplane/flowplane/internal/component"
)

func init() {
	component.Default.RegisterBuffer(component.Spec{
		Name: "tumbling_window",
		Summary: "Groups messages into consecutive, non-overlapping windows of `interval` processing " +
			"time and emits each window as one batch when it ends (windows without messages emit nothing).",
		Schema: schemaWithLimits(map[string]any{
			"interval": component.DurationProp("Length of each window. Windows start when the buffer is built "+
				"and follow each other without gaps.", nil),
		}, "interval"),
		Example: `type: tumbling_window
interval: 100ms
`,
	}, NewTumblingWindow)
}

var _ component.Buffer = (*TumblingWindow)(nil)

// TumblingWindowConfig is the configuration of the tumbling_window buffer.
type TumblingWindowConfig struct {
	Interval string `json:"interval"`
	LimitConfig
}

// TumblingWindow emits, at the end of each interval, the messages that
// arrived during it. When it holds max_messages or max_bytes, Write waits
// for the window to end and be read: the input is slowed down, and what it
// then reads falls in a later window.
type TumblingWindow struct {
	timedQueue
	interval time.Duration
	start    time.Time // the first window starts here
}

// NewTumblingWindow builds a tumbling_window buffer from its configuration.
func NewTumblingWindow(conf map[string]any, res component.Resources) (component.Buffer, error) {
	var c TumblingWindowConfig
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	d, err := parseDuration("interval", c.Interval)
	if err != nil {
		return nil, err
	}
	l, err := c.build(1)
	if err != nil {
		return nil, err
	}
	w := &TumblingWindow{interval: d, start: time.Now()}
	w.timedQueue = newTimedQueue(logger(res), l, w.cut)
	return w, nil
}

// end is when the window holding time t ends.
func (w *TumblingWindow) end(t time.Time) time.Time {
	n := t.Sub(w.start) / w.interval
	return w.start.Add((n + 1) * w.interval)
}

// cut is the front window: the entries that arrived before its end.
func (w *TumblingWindow) cut(q []entry) (int, time.Duration) {
	end := w.end(q[0].at)
	n := 1
	for n < len(q) && q[n].at.Before(end) {
		n++
	}
	return n, time.Until(end)
}
