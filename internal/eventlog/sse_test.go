package eventlog

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/wire"
)

// sseServer serves l's events on a real listener on 127.0.0.1 the way an
// API route would, and reports each ServeSSE result on done.
type sseServer struct {
	*httptest.Server
	done chan error
}

func newSSEServer(t *testing.T, l *Log, keepAlive time.Duration) *sseServer {
	t.Helper()
	return newSSEServerCtx(t, l, keepAlive, nil)
}

// newSSEServerCtx is newSSEServer with the server's base context; nil means
// the default.
func newSSEServerCtx(t *testing.T, l *Log, keepAlive time.Duration, base context.Context) *sseServer {
	t.Helper()
	s := &sseServer{done: make(chan error, 16)}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := FilterFromQuery(r.URL.Query())
		if err == nil {
			err = ServeSSE(w, r, l, f, keepAlive)
		}
		if errors.Is(err, ErrInvalidQuery) || errors.Is(err, ErrInvalidHeader) {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
		s.done <- err
	}))
	if base != nil {
		s.Config.BaseContext = func(net.Listener) context.Context { return base }
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// sseClient is one open event stream.
type sseClient struct {
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

// connect opens the stream at path with optional Last-Event-ID.
func (s *sseServer) connect(t *testing.T, path, lastEventID string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &sseClient{resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(c.close)
	return c
}

func (c *sseClient) close() {
	c.cancel()
	_ = c.resp.Body.Close()
}

// block reads the lines of the next block, up to its empty line.
func (c *sseClient) block(t *testing.T) []string {
	t.Helper()
	var lines []string
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream after %q: %v", lines, err)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return lines
		}
		lines = append(lines, line)
	}
}

func eventBlock(t *testing.T, ev wire.Event) []string {
	return []string{fmt.Sprintf("id: %d", ev.ID), "event: " + ev.Kind, "data: " + encodeEvent(t, ev)}
}

func TestSSEFraming(t *testing.T) {
	l := New(Options{Now: newFakeClock().Now})
	l.Append(wire.Event{Kind: wire.EventNodeStarted}) // before the client: not sent
	srv := newSSEServer(t, l, time.Hour)
	c := srv.connect(t, "/", "")

	wantHeader := map[string]string{
		"Content-Type":      "text/event-stream",
		"Cache-Control":     "no-cache",
		"Connection":        "keep-alive",
		"X-Accel-Buffering": "no",
	}
	for k, v := range wantHeader {
		if got := c.resp.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if c.resp.StatusCode != http.StatusOK {
		t.Errorf("status = %d, want 200", c.resp.StatusCode)
	}
	if diff := cmp.Diff([]string{"retry: 2000"}, c.block(t)); diff != "" {
		t.Fatalf("first block (-want +got):\n%s", diff)
	}
	// The retry line is written after the subscription is made, so these
	// are live.
	evs := []wire.Event{
		l.Append(wire.Event{Kind: wire.EventStreamStateChanged, ResourceID: "s1", Message: "line one\nline two <&>", Data: map[string]any{"state": "running"}}),
		l.Append(wire.Event{Kind: wire.EventIntentAccepted, OperationID: "op-1", CorrelationID: "c-1"}),
	}
	for _, ev := range evs {
		if diff := cmp.Diff(eventBlock(t, ev), c.block(t)); diff != "" {
			t.Errorf("event %d block (-want +got):\n%s", ev.ID, diff)
		}
	}
	if want := `data: {"id":2,"kind":"stream_state_changed","occurred_at":"2026-03-04T05:06:07.891Z","resource_id":"s1","message":"line one\nline two <&>","data":{"state":"running"}}`; eventBlock(t, evs[0])[2] != want {
		t.Errorf("data line = %s\nwant        %s", eventBlock(t, evs[0])[2], want)
	}
}

func TestSSEReplay(t *testing.T) {
	tests := []struct {
		name        string
		path        string
		lastEventID string
		want        []string // "R<oldest>" or an event id
	}{
		{name: "Last-Event-ID", path: "/", lastEventID: "7", want: strs(8, 9, 10)},
		{name: "last_event_id query parameter", path: "/?last_event_id=8", want: strs(9, 10)},
		{name: "the header wins over the parameter", path: "/?last_event_id=8", lastEventID: "9", want: strs(10)},
		{name: "since_id starts the stream", path: "/?since_id=9", want: strs(10)},
		{name: "filters apply to the replay", path: "/?kind=odd", lastEventID: "6", want: strs(7, 9)},
		{name: "too old: resync first", path: "/", lastEventID: "2", want: append([]string{"R5"}, strs(5, 6, 7, 8, 9, 10)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(Options{Capacity: 6})
			for i := range 10 {
				l.Append(wire.Event{Kind: [2]string{"odd", "even"}[i%2]})
			}
			srv := newSSEServer(t, l, time.Hour)
			c := srv.connect(t, tt.path, tt.lastEventID)
			if diff := cmp.Diff([]string{"retry: 2000"}, c.block(t)); diff != "" {
				t.Fatalf("first block (-want +got):\n%s", diff)
			}
			var got []string
			for range tt.want {
				b := c.block(t)
				if len(b) == 2 && b[0] == "event: resync" {
					var oldest int64
					if _, err := fmt.Sscanf(b[1], `data: {"oldest_id": %d}`, &oldest); err != nil {
						t.Fatalf("resync block %q: %v", b, err)
					}
					got = append(got, fmt.Sprintf("R%d", oldest))
					continue
				}
				var id int64
				if len(b) != 3 {
					t.Fatalf("block %q is not an event", b)
				}
				if _, err := fmt.Sscanf(b[0], "id: %d", &id); err != nil {
					t.Fatalf("block %q: %v", b, err)
				}
				got = append(got, fmt.Sprint(id))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("replayed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSSEResyncFraming(t *testing.T) {
	l := New(Options{Capacity: 2})
	appendN(l, 5, "k")
	srv := newSSEServer(t, l, time.Hour)
	c := srv.connect(t, "/", "1")
	c.block(t) // retry
	if diff := cmp.Diff([]string{"event: resync", `data: {"oldest_id": 4}`}, c.block(t)); diff != "" {
		t.Errorf("resync block (-want +got):\n%s", diff)
	}
}

func TestSSEKeepAlive(t *testing.T) {
	l := New(Options{})
	srv := newSSEServer(t, l, 5*time.Millisecond)
	c := srv.connect(t, "/", "")
	c.block(t) // retry
	for range 3 {
		if diff := cmp.Diff([]string{": keep-alive"}, c.block(t)); diff != "" {
			t.Fatalf("idle block (-want +got):\n%s", diff)
		}
	}
	// An event still gets through between keep-alives.
	ev := l.Append(wire.Event{Kind: "k"})
	for range 1000 {
		b := c.block(t)
		if b[0] == ": keep-alive" {
			continue
		}
		if diff := cmp.Diff(eventBlock(t, ev), b); diff != "" {
			t.Fatalf("event block (-want +got):\n%s", diff)
		}
		return
	}
	t.Fatal("the event never arrived")
}

func TestSSEBadRequest(t *testing.T) {
	tests := []struct {
		name        string
		path        string
		lastEventID string
		want        error
	}{
		{"malformed header", "/", "abc", ErrInvalidHeader},
		{"negative header", "/", "-3", ErrInvalidHeader},
		{"malformed parameter", "/?last_event_id=x", "", ErrInvalidQuery},
		{"repeated parameter", "/?last_event_id=1&last_event_id=2", "", ErrInvalidQuery},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newSSEServer(t, New(Options{}), time.Hour)
			c := srv.connect(t, tt.path, tt.lastEventID)
			if c.resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status = %d, want 400", c.resp.StatusCode)
			}
			if err := <-srv.done; !errors.Is(err, tt.want) {
				t.Errorf("ServeSSE = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestSSEDisconnect checks that a client going away ends the handler and
// leaves nothing running.
func TestSSEDisconnect(t *testing.T) {
	base := runtime.NumGoroutine()
	l := New(Options{})
	srv := newSSEServer(t, l, time.Hour)
	c := srv.connect(t, "/", "")
	c.block(t) // retry: the handler is waiting for events
	c.close()
	select {
	case err := <-srv.done:
		if err != nil {
			t.Errorf("ServeSSE = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeSSE did not return after the client went away")
	}
	srv.Client().CloseIdleConnections()
	srv.Close()
	checkGoroutines(t, base)
}

// TestSSEServerShutdown checks that the end of the request's context
// (here the server's base context) ends a stream.
func TestSSEServerShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	srv := newSSEServerCtx(t, New(Options{}), time.Hour, ctx)
	c := srv.connect(t, "/", "")
	c.block(t) // retry
	cancel()
	select {
	case err := <-srv.done:
		if err != nil {
			t.Errorf("ServeSSE = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeSSE did not return after its context ended")
	}
	if _, err := io.ReadAll(c.r); err != nil {
		t.Errorf("reading the rest of the stream: %v, want its end", err)
	}
}
