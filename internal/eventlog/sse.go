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
	sse := StartSSE(w)
	sub := l.Subscribe(ctx, afterID, f)
	keep := time.NewTimer(keepAlive)
	defer keep.Stop()
	for {
		if ctx.Err() != nil {
			return nil
		}
		d, ok, wait := sub.poll()
		if ok {
			writeDelivery(sse, d)
			if sse.Buffered() < sseFlushSize {
				continue
			}
		}
		if sse.Buffered() > 0 {
			if err := sse.Flush(); err != nil {
				if errors.Is(err, http.ErrNotSupported) {
					return err
				}
				return nil // the client went away
			}
			keep.Reset(keepAlive)
		}
		if ok {
			continue
		}
		select {
		case <-wait:
		case <-keep.C:
			sse.KeepAlive()
		case <-ctx.Done():
			return nil
		}
	}
}

// SSE writes a Server-Sent Events response in the framing of API.md
// "Events" (see ServeSSE): StartSSE sends the headers and the retry line,
// Event and KeepAlive buffer blocks, Flush sends them. ServeSSE streams an
// event log with it; other streams of events (a live tap) use it for the
// same framing. Not safe for concurrent use.
type SSE struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
	enc *json.Encoder
}

// StartSSE answers 200 with the headers of an event stream and buffers
// the "retry: 2000" line; nothing is sent before the first Flush.
func StartSSE(w http.ResponseWriter) *SSE {
	s := &SSE{w: w, rc: http.NewResponseController(w)}
	// A stream outlives any write timeout of the server; not every writer
	// supports deadlines, and those that do not have none to lift.
	_ = s.rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s.enc = json.NewEncoder(&s.buf)
	s.enc.SetEscapeHTML(false)
	s.buf.WriteString("retry: 2000\n\n")
	return s
}

// Event buffers one block: "id: <id>" when id is not empty, "event:
// <kind>", and "data: " v as one line of JSON. A v JSON cannot carry is
// sent as null.
func (s *SSE) Event(id, kind string, v any) {
	s.event(id, kind, func() error { return s.enc.Encode(v) }, nil)
}

func (s *SSE) event(id, kind string, encode, fallback func() error) {
	if id != "" {
		s.buf.WriteString("id: ")
		s.buf.WriteString(sseField(id))
		s.buf.WriteString("\n")
	}
	s.buf.WriteString("event: ")
	s.buf.WriteString(sseField(kind))
	s.buf.WriteString("\ndata: ")
	// The encoder writes nothing on failure and ends the record with the
	// line's newline.
	if encode() != nil {
		if fallback == nil || fallback() != nil {
			s.buf.WriteString("null\n")
		}
	}
	s.buf.WriteString("\n")
}

// KeepAlive buffers the keep-alive comment.
func (s *SSE) KeepAlive() { s.buf.WriteString(": keep-alive\n\n") }

// Buffered returns the number of bytes not yet sent.
func (s *SSE) Buffered() int { return s.buf.Len() }

// Flush sends what is buffered. It returns an error wrapping
// http.ErrNotSupported if the writer cannot flush, and another error once
// the client went away.
func (s *SSE) Flush() error {
	if s.buf.Len() == 0 {
		return nil
	}
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil {
		if errors.Is(err, http.ErrNotSupported) {
			return fmt.Errorf("eventlog: server-sent events: %w", err)
		}
		return err
	}
	s.buf.Reset()
	return nil
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

// writeDelivery buffers one SSE block.
func writeDelivery(sse *SSE, d Delivery) {
	if d.Resync {
		fmt.Fprintf(&sse.buf, "event: resync\ndata: {\"oldest_id\": %d}\n\n", d.OldestID)
		return
	}
	ev := d.Event
	// Encoding fails only for Data holding what JSON cannot carry (a NaN,
	// a channel); the event still goes out, without it.
	sse.event(strconv.FormatInt(ev.ID, 10), ev.Kind, func() error { return sse.enc.Encode(ev) }, func() error {
		ev.Data = nil
		return sse.enc.Encode(ev)
	})
}

// sseField keeps a field on its line: a line break would end it early.
func sseField(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
