package buffer

import (
	"fmt"
	"maps"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

// Defaults of the bounds of what a buffer holds.
const (
	DefaultMaxMessages = 100_000
	DefaultMaxBytes    = 64 << 20
)

// LimitConfig is the part of a window buffer's configuration that bounds
// what it holds. Nil fields take the defaults.
type LimitConfig struct {
	MaxMessages *int `json:"max_messages"`
	MaxBytes    *int `json:"max_bytes"`
}

// limitProps are the schema properties of LimitConfig, added to props.
func limitProps(props map[string]any) map[string]any {
	out := maps.Clone(props)
	out["max_messages"] = countProp("Most messages held (a sliding window: at least window_size, which "+
		"an unset value is raised to). A batch that would go beyond it waits until an emitted window made "+
		"room, and the input is not read meanwhile (back-pressure). A batch arriving at an empty buffer is "+
		"taken whatever its size.", DefaultMaxMessages)
	out["max_bytes"] = countProp("Most payload bytes held, with the same back-pressure as max_messages.", DefaultMaxBytes)
	return out
}

// limit is how much a buffer may hold.
type limit struct{ messages, bytes int }

// build checks c and applies the defaults; minMessages is the least
// max_messages may be (a window's size), which an unset max_messages is
// raised to.
func (c LimitConfig) build(minMessages int) (limit, error) {
	l := limit{messages: max(DefaultMaxMessages, minMessages), bytes: DefaultMaxBytes}
	if c.MaxMessages != nil {
		if *c.MaxMessages < max(minMessages, 1) {
			if minMessages > 1 {
				return l, fmt.Errorf("max_messages: must be at least window_size (%d), got %d", minMessages, *c.MaxMessages)
			}
			return l, fmt.Errorf("max_messages: must be at least 1, got %d", *c.MaxMessages)
		}
		l.messages = *c.MaxMessages
	}
	if c.MaxBytes != nil {
		if *c.MaxBytes < 1 {
			return l, fmt.Errorf("max_bytes: must be at least 1, got %d", *c.MaxBytes)
		}
		l.bytes = *c.MaxBytes
	}
	return l, nil
}

// usage is what a buffer holds: messages and their payload bytes.
type usage struct{ messages, bytes int }

func usageOf(b message.Batch) usage { return usage{b.Len(), b.Bytes()} }

func (u *usage) add(v usage) { u.messages += v.messages; u.bytes += v.bytes }
func (u *usage) sub(v usage) { u.messages -= v.messages; u.bytes -= v.bytes }

// admits reports whether a buffer holding u may take v as well: an empty
// buffer takes anything, so that a batch larger than the limit is not
// refused forever.
func (l limit) admits(u, v usage) bool {
	return u.messages == 0 || (u.messages+v.messages <= l.messages && u.bytes+v.bytes <= l.bytes)
}

// full reports whether u reached the limit.
func (l limit) full(u usage) bool { return u.messages >= l.messages || u.bytes >= l.bytes }

// schemaWithLimits is component.ObjectSchema with the limit properties.
func schemaWithLimits(props map[string]any, required ...string) map[string]any {
	return component.ObjectSchema(limitProps(props), required...)
}
