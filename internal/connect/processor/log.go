package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterProcessor(component.Spec{
		Name:    "log",
		Summary: "Logs one line per message through the stream's logger and passes the batch on unchanged.",
		Schema: component.ObjectSchema(map[string]any{
			"level": component.EnumProp("Log level of the lines; when the logger does not record this level "+
				"the processor costs almost nothing.", "info", "debug", "info", "warn", "error"),
			"message": component.Prop("string", "expr-lang expression over `this` and `meta` producing the line; "+
				"a string is logged as is, any other value as JSON. Empty logs the payload.", ""),
		}),
		Example: `type: log
level: info
message: '"order " + string(this.id) + " worth " + string(this.v)'
`,
	}, NewLog)
}

var _ component.Processor = (*Log)(nil)

// LogConfig is the configuration of the log processor.
type LogConfig struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

// Log logs each message and passes the batch through.
type Log struct {
	log   *slog.Logger
	level slog.Level
	prog  *program // nil: log the payload
}

// NewLog builds a log processor from its configuration.
func NewLog(conf map[string]any, res component.Resources) (component.Processor, error) {
	c := LogConfig{Level: "info"}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	p := &Log{log: res.Logger}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	switch c.Level {
	case "debug":
		p.level = slog.LevelDebug
	case "info":
		p.level = slog.LevelInfo
	case "warn":
		p.level = slog.LevelWarn
	case "error":
		p.level = slog.LevelError
	default:
		return nil, fmt.Errorf("level: %q is not one of debug, info, warn, error", c.Level)
	}
	if c.Message != "" {
		prog, err := compile("message", c.Message)
		if err != nil {
			return nil, err
		}
		p.prog = prog
	}
	return p, nil
}

// Process logs one line per message and returns b. An expression that
// fails, or a structured value that cannot be serialized, fails the batch.
func (p *Log) Process(ctx context.Context, b message.Batch) ([]message.Batch, error) {
	if !p.log.Enabled(ctx, p.level) {
		return []message.Batch{b}, nil
	}
	var e *evaluator
	if p.prog != nil {
		e = p.prog.acquire()
		defer p.prog.release(e)
	}
	for i := range b.Messages {
		m := &b.Messages[i]
		line, err := p.line(e, m)
		if err != nil {
			return nil, fmt.Errorf("log: message %d: %w", i, err)
		}
		p.log.Log(ctx, p.level, line)
	}
	return []message.Batch{b}, nil
}

func (p *Log) line(e *evaluator, m *message.Message) (string, error) {
	if p.prog == nil {
		b, err := m.Payload()
		return string(b), err
	}
	this, owned, err := view(m)
	if err != nil {
		return "", err
	}
	out, err := p.prog.eval(e, m, this, owned)
	if err != nil {
		return "", err
	}
	if s, ok := out.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// Close releases nothing.
func (p *Log) Close(context.Context) error { return nil }
