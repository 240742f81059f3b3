package ctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// kindResync is the pseudo event of a stream that lost events: whatever
// was derived from events must be read again.
const kindResync = "resync"

// reconnects bounds how often a dropped event stream is reopened in a row.
const reconnects = 10

// eventStream is a subscription to the Hub's live events that reopens a
// dropped connection with Last-Event-ID, so nothing is missed or repeated.
type eventStream struct {
	events chan wire.Event
	errc   chan error // one error when the stream gives up
	cancel context.CancelFunc
}

// live is the start of a subscription that carries only new events.
const live = -1

// subscribe opens the live event stream with the filters in q, after the
// event id from (live: only new events), and returns once the Hub has
// subscribed it (its first block arrived): an event of a write sent
// afterwards is on it.
func (c *Client) subscribe(ctx context.Context, q url.Values, from int64) (*eventStream, error) {
	return c.subscribeRetrying(ctx, q, from, false)
}

// subscribeRetrying is subscribe that, with retry, also waits for a Hub
// that cannot be reached yet, as it would for one that went away (a
// follower started while the Hub restarts).
func (c *Client) subscribeRetrying(ctx context.Context, q url.Values, from int64, retry bool) (*eventStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &eventStream{events: make(chan wire.Event, 64), errc: make(chan error, 1), cancel: cancel}
	body, err := c.openStream(ctx, q, from)
	var ce *ConnError
	for attempt := 1; retry && errors.As(err, &ce) && attempt <= reconnects; attempt++ {
		select {
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		body, err = c.openStream(ctx, q, from)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	br := bufio.NewReader(body)
	// The Hub subscribes before it sends its first block ("retry:").
	ready := make(chan error, 1)
	go s.run(ctx, c, q, from, body, br, ready)
	select {
	case err := <-ready:
		if err != nil {
			cancel()
			return nil, err
		}
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
	return s, nil
}

// close ends the subscription.
func (s *eventStream) close() { s.cancel() }

func (c *Client) openStream(ctx context.Context, q url.Values, lastID int64) (io.ReadCloser, error) {
	hreq := request{method: http.MethodGet, path: "/events/stream", query: q}
	resp, err := c.sendStream(ctx, hreq, lastID)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, c.problem(resp.StatusCode, b)
	}
	return resp.Body, nil
}

func (c *Client) sendStream(ctx context.Context, req request, lastID int64) (*http.Response, error) {
	u := c.base + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	hr.Header.Set("Accept", "text/event-stream")
	if lastID >= 0 {
		hr.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := c.stream.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.unreachable(err)
	}
	return resp, nil
}

// run reads the stream, reopening it after the last event seen when the
// connection drops (at most reconnects times in a row).
func (s *eventStream) run(ctx context.Context, c *Client, q url.Values, lastID int64, body io.ReadCloser, br *bufio.Reader, ready chan<- error) {
	first := true
	failures := 0
	for {
		err := readSSE(br, func(b sseBlock) bool {
			if first {
				first = false
				ready <- nil
			}
			failures = 0
			ev, ok := b.event()
			if !ok {
				return true
			}
			if ev.ID > 0 {
				lastID = ev.ID
			}
			select {
			case s.events <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		})
		body.Close()
		if ctx.Err() != nil {
			return
		}
		if first {
			ready <- fmt.Errorf("the event stream ended before it started: %v", err)
			return
		}
		for {
			failures++
			if failures > reconnects {
				s.errc <- fmt.Errorf("the event stream dropped and could not be reopened: %w", err)
				return
			}
			select {
			case <-time.After(time.Duration(failures) * 200 * time.Millisecond):
			case <-ctx.Done():
				return
			}
			body, err = c.openStream(ctx, q, lastID)
			if err == nil {
				br = bufio.NewReader(body)
				break
			}
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// sseBlock is one block of a server-sent event stream.
type sseBlock struct {
	id, kind, data string
}

// event is the block's event; a resync block is the pseudo event
// kindResync. Comments and the retry block are no event.
func (b sseBlock) event() (wire.Event, bool) {
	switch {
	case b.kind == kindResync:
		return wire.Event{Kind: kindResync}, true
	case b.data == "":
		return wire.Event{}, false
	}
	var ev wire.Event
	if err := json.Unmarshal([]byte(b.data), &ev); err != nil {
		return wire.Event{}, false
	}
	return ev, true
}

// readSSE calls fn with each block of r (comments included as empty
// blocks) until r ends or fn returns false.
func readSSE(r *bufio.Reader, fn func(sseBlock) bool) error {
	var b sseBlock
	var data []string
	any := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if any {
				b.data = strings.Join(data, "\n")
				if !fn(b) {
					return nil
				}
			}
			b, data, any = sseBlock{}, nil, false
			continue
		}
		any = true
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			b.id = value
		case "event":
			b.kind = value
		case "data":
			data = append(data, value)
		}
	}
}
