package buffer

import (
	"time"

	"github.com/flowplane/flowplane/internal/component"
)

func init() {
	component.Default.RegisterBuffer(component.Spec{
		Name: "session_window",
		Summary: "Groups messages into sessions: a session ends when no message arrived for `gap` " +
			"and is then emitted as one batch.",
		Schema: schemaWithLimits(map[string]any{
			"gap": component.DurationProp("Quiet time (processing time) that ends a session.", nil),
		}, "gap"),
		Example: `type: session_window
gap: 100ms
`,
	}, NewSessionWindow)
}

var _ component.Buffer = (*SessionWindow)(nil)

// SessionWindowConfig is the configuration of the session_window buffer.
type SessionWindowConfig struct {
	Gap string `json:"gap"`
	LimitConfig
}

// SessionWindow emits the messages of a session once no message arrived
// for gap. When it holds max_messages or max_bytes, Write waits: the input
// is not read, so the gap passes and the session ends there.
type SessionWindow struct {
	timedQueue // holds the open session
	gap        time.Duration
}

// NewSessionWindow builds a session_window buffer from its configuration.
func NewSessionWindow(conf map[string]any, res component.Resources) (component.Buffer, error) {
	var c SessionWindowConfig
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	d, err := parseDuration("gap", c.Gap)
	if err != nil {
		return nil, err
	}
	l, err := c.build(1)
	if err != nil {
		return nil, err
	}
	s := &SessionWindow{gap: d}
	s.timedQueue = newTimedQueue(logger(res), l, s.cut)
	return s, nil
}

// cut is the whole open session, due once no message arrived for gap.
func (s *SessionWindow) cut(q []entry) (int, time.Duration) {
	return len(q), s.gap - time.Since(q[len(q)-1].at)
}
