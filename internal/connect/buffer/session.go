package buffer

import (
	"context"
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterBuffer(component.Spec{
		Name: "session_window",
		Summary: "Groups messages into sessions: a session ends when no message arrived for `gap` " +
			"and is then emitted as one batch; with `join`, the batch is instead the result of an SQL query " +
			"over the session's messages, one table per named input of multiple_inputs.",
		Schema: schemaWithLimits(map[string]any{
			"gap":  component.DurationProp("Quiet time (processing time) that ends a session.", nil),
			"join": joinSchema(),
		}, "gap"),
		Example: `type: session_window
gap: 100ms
join:
  query: "SELECT * FROM orders JOIN shipments ON orders.order_id = shipments.order_id"
  codec: {type: json}
`,
	}, NewSessionWindow)
}

var _ component.Buffer = (*SessionWindow)(nil)

// SessionWindowConfig is the configuration of the session_window buffer.
type SessionWindowConfig struct {
	Gap  string      `json:"gap"`
	Join *JoinConfig `json:"join"`
	LimitConfig
}

// SessionWindow emits the messages of a session once no message arrived
// for gap. When it holds max_messages or max_bytes, Write waits: the input
// is not read, so the gap passes and the session ends there.
type SessionWindow struct {
	timedQueue // holds the open session
	gap        time.Duration
	join       *join // nil without join
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
	if c.Join != nil {
		if s.join, err = newJoin(c.Join, res); err != nil {
			return nil, err
		}
	}
	s.timedQueue = newTimedQueue(logger(res), l, s.cut)
	return s, nil
}

// Read returns the next closed session: its messages, or with join the
// query's result as a table, acknowledging every input batch of the
// session. A join that fails (a payload the codec rejects, a query
// SQLite refuses) negatively acknowledges the session's input batches
// with its error, so that inputs able to redeliver do, and returns it:
// the stream records it and reads again after its retry backoff.
func (s *SessionWindow) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	b, ack, err := s.timedQueue.Read(ctx)
	if err != nil || s.join == nil {
		return b, ack, err
	}
	out, err := s.join.run(ctx, b)
	if err != nil {
		err = fmt.Errorf("session_window join: %w", err)
		if aerr := ack(context.WithoutCancel(ctx), err); aerr != nil {
			s.log.Warn("negatively acknowledging a session whose join failed", "err", aerr)
		}
		return message.Batch{}, nil, err
	}
	return out, ack, nil
}

// cut is the whole open session, due once no message arrived for gap.
func (s *SessionWindow) cut(q []entry) (int, time.Duration) {
	return len(q), s.gap - time.Since(q[len(q)-1].at)
}
