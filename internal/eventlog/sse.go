package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultKeepAlive is the idle time after which ServeSSE writes a keep-alive
// comment.
const DefaultKeepAlive = 15 * time.Second

// sseFlushSize bounds how much ServeSSE buffers before writing while many
// events are ready at once (a replay).
const sseFlushSize = 64 << 10

// ServeSSE streams the events of l that match f to the client as
// Server-Sent Events, until the client goes away or the request's context
// ends. The framing (API.md "Events"):
//
//	retry: 2000                         once, first
//
//	id: <id>                            one block per event
//	event: <kind>
//	data: <the event record as one line of JSON>
//
//	event: resync                       events were dropped, see Delivery.Resync;
//	data: {"oldest_id": <id>}           the stream continues from oldest_id
//
//	: keep-alive                        after keepAlive without a write
//
// Every block ends with an empty line. keepAlive below 1 means
// DefaultKeepAlive. The stream starts after the id in the Last-Event-ID
// header, else the last_event_id query parameter (for clients that cannot
// set headers), else f.AfterID when it is above 0; without any of them it
// carries only events added from now on. Everything ready is flushed before
// the writer waits, so no event is held back.
//
// ServeSSE returns an error, having written nothing, only for a malformed
// Last-Event-ID (wrapping ErrInvalidHeader) or last_event_id (a
// *QueryError); the caller answers 400. Once the stream has begun it returns
// nil when it ends, or an error wrapping http.ErrNotSupported if w cannot
// flush.
func ServeSSE(w http.ResponseWriter, r *http.Request, l *Log, f Filter, keepAlive time.Duration) error {
	afterID, err := startID(r, f)
	if err != nil {
		return err
	}
	if keepAlive < 1 {
		keepAlive = DefaultKeepAlive
	}
	ctx := r.Context()
	rc := http.NewResponseController(w)
	// A stream outlives any write timeout of the server; not every writer
	// supports deadlines, and those that do not have none to lift.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	sub := l.Subscribe(ctx, afterID, f)
	keep := time.NewTimer(keepAlive)
	defer keep.Stop()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteString("retry: 2000\n\n")
	for {
		if ctx.Err() != nil {
			return nil
		}
		d, ok, wait := sub.poll()
		if ok {
			writeDelivery(&buf, enc, d)
			if buf.Len() < sseFlushSize {
				continue
			}
		}
		if buf.Len() > 0 {
			if _, err := w.Write(buf.Bytes()); err != nil {
				return nil // the client went away
			}
			if err := rc.Flush(); err != nil {
				if errors.Is(err, http.ErrNotSupported) {
					return fmt.Errorf("eventlog: server-sent events: %w", err)
				}
				return nil
			}
			buf.Reset()
			keep.Reset(keepAlive)
		}
		if ok {
			continue
		}
		select {
		case <-wait:
		case <-keep.C:
			buf.WriteString(": keep-alive\n\n")
		case <-ctx.Done():
			return nil
		}
	}
}

// startID returns the id a stream starts after, or Live.
func startID(r *http.Request, f Filter) (int64, error) {
	if v := strings.TrimSpace(r.Header.Get("Last-Event-ID")); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 0 {
			return 0, fmt.Errorf("%w: Last-Event-ID must be a non-negative integer event id", ErrInvalidHeader)
		}
		return id, nil
	}
	q := r.URL.Query()
	if vs := q["last_event_id"]; len(vs) > 0 {
		id, err := strconv.ParseInt(vs[0], 10, 64)
		if len(vs) > 1 || err != nil || id < 0 {
			return 0, &QueryError{Param: "last_event_id", Reason: "must be one non-negative integer event id"}
		}
		return id, nil
	}
	if f.AfterID > 0 {
		return f.AfterID, nil
	}
	return Live, nil
}

// writeDelivery appends one SSE block to buf.
func writeDelivery(buf *bytes.Buffer, enc *json.Encoder, d Delivery) {
	if d.Resync {
		fmt.Fprintf(buf, "event: resync\ndata: {\"oldest_id\": %d}\n\n", d.OldestID)
		return
	}
	ev := d.Event
	buf.WriteString("id: ")
	buf.WriteString(strconv.FormatInt(ev.ID, 10))
	buf.WriteString("\nevent: ")
	buf.WriteString(sseField(ev.Kind))
	buf.WriteString("\ndata: ")
	// Encoding fails only for Data holding what JSON cannot carry (a NaN,
	// a channel); the event still goes out, without it. The encoder writes
	// nothing on failure and ends the record with the line's newline.
	if enc.Encode(ev) != nil {
		ev.Data = nil
		_ = enc.Encode(ev)
	}
	buf.WriteString("\n")
}

// sseField keeps a field on its line: a line break would end it early.
func sseField(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
