package websocket

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// maxMessageBytes bounds one inbound message: a larger one ends the
// connection (the server sent more than any batch should hold).
const maxMessageBytes = 16 << 20

// framesBuffered is how many received messages wait for Read before the
// connection's reader stops reading (and the server's writes block).
const framesBuffered = 256

func init() {
	headers := component.Prop("object", "Request headers sent with the opening handshake (e.g. Authorization); never logged.", nil)
	headers["additionalProperties"] = map[string]any{"type": "string"}
	timeout := component.Prop("integer", "Connection timeout in seconds: the most a dial plus opening handshake may take.", 10)
	timeout["minimum"] = 1
	u := component.Prop("string", "WebSocket server URL, ws://host:port/path or wss://host:port/path.", nil)
	u["pattern"] = `^wss?://[^/?#]+`
	bs := component.Prop("integer", "Extension: most messages per batch. A batch holds the messages already received, up to this many; Read never waits to fill it.", 1)
	bs["minimum"] = 1
	component.Default.RegisterInput(component.Spec{
		Name: "websocket",
		Summary: "WebSocket client: connects to url and turns every text or binary message the server sends into a " +
			"message. A dropped connection makes Read fail; the stream retries it with backoff and the input " +
			"dials again. WebSocket has no acknowledgements, so delivery is at-most-once: messages sent while " +
			"disconnected are lost.",
		Schema: component.ObjectSchema(map[string]any{
			"url":        u,
			"headers":    headers,
			"timeout":    timeout,
			"batch_size": bs,
		}, "url"),
		Example: `type: websocket
url: ws://127.0.0.1:8800/events
headers:
  Authorization: Bearer ${secret:env:WS_TOKEN}
timeout: 10
`,
	}, NewInput)
}

var _ component.Input = (*Input)(nil)

// Config is the configuration of the websocket input.
type Config struct {
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	Timeout   int               `json:"timeout"`
	BatchSize int               `json:"batch_size"`
}

// errClosed is returned by Connect and Read after Close.
var errClosed = errors.New("websocket: input closed")

// Input is a WebSocket client reading messages from one server.
type Input struct {
	url       string // as configured; may hold credentials
	shown     string // url without credentials or query, for logs and errors
	header    http.Header
	dialer    *websocket.Dialer
	batchSize int
	log       *slog.Logger

	mu     sync.Mutex // guards sess and closed
	sess   *session   // the live connection, nil between connections
	closed bool
}

// session is one connection and the goroutine reading from it.
type session struct {
	conn   *websocket.Conn
	frames chan frame    // closed by the reader when the connection ends
	stop   chan struct{} // closed to make the reader give up a blocked send
	exited chan struct{} // closed when the reader returned
	once   sync.Once     // closes stop and conn

	err error // why the connection ended; set before frames is closed
}

type frame struct {
	kind int // websocket.TextMessage or websocket.BinaryMessage
	data []byte
}

// NewInput builds a websocket input from its configuration.
func NewInput(conf map[string]any, res component.Resources) (component.Input, error) {
	c := Config{Timeout: 10, BatchSize: 1}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	shown, err := checkURL(c.URL)
	if err != nil {
		return nil, err
	}
	if c.Timeout < 1 {
		return nil, fmt.Errorf("timeout: must be at least 1 (seconds), got %d", c.Timeout)
	}
	if c.BatchSize < 1 {
		return nil, fmt.Errorf("batch_size: must be at least 1, got %d", c.BatchSize)
	}
	h := http.Header{}
	for k, v := range c.Headers {
		if k == "" {
			return nil, errors.New("headers: a header name must not be empty")
		}
		h.Set(k, v)
	}
	timeout := time.Duration(c.Timeout) * time.Second
	log := res.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Input{
		url: c.URL, shown: shown, header: h, batchSize: c.BatchSize, log: log,
		dialer: dialer(res.Net, timeout),
	}, nil
}

// dialer is the input's websocket dialer: through the Hub work's
// restricted network, without a proxy (which would connect where the
// restriction cannot see), or the host's.
func dialer(n sandbox.Net, timeout time.Duration) *websocket.Dialer {
	d := &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: timeout}
	if n.Restricted() {
		d.Proxy, d.NetDialContext = nil, n.Dial(nil)
	}
	return d
}

// checkURL validates a ws:// or wss:// URL and returns the form shown in
// logs and errors: without user information and query, which may hold
// credentials.
func checkURL(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("url: required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("url: not a URL: %w", redactURLError(err))
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return "", fmt.Errorf("url: scheme %q is not ws or wss", u.Scheme)
	}
	if u.Host == "" {
		return "", errors.New("url: no host")
	}
	return Redact(u), nil
}

// redactURLError drops the URL, which may hold credentials, from a parse
// error.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Redact returns u without user information, query or fragment.
func Redact(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

// Connect dials the server. It fails, within the configured timeout, when
// the server is down or refuses the handshake; it may be called again
// after a failure.
func (in *Input) Connect(ctx context.Context) error {
	_, err := in.session(ctx)
	return err
}

// session returns the live connection, dialing one when there is none.
// The dial runs without the lock, so Close does not wait for it; Connect
// and Read, which dial, are called from one goroutine.
func (in *Input) session(ctx context.Context) (*session, error) {
	in.mu.Lock()
	closed, live := in.closed, in.sess
	in.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	if live != nil {
		return live, nil
	}
	conn, resp, err := in.dialer.DialContext(ctx, in.url, in.header)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("websocket: connect to %s: %w (HTTP %d)", in.shown, redactURLError(err), resp.StatusCode)
		}
		return nil, fmt.Errorf("websocket: connect to %s: %w", in.shown, redactURLError(err))
	}
	conn.SetReadLimit(maxMessageBytes)
	s := &session{
		conn:   conn,
		frames: make(chan frame, framesBuffered),
		stop:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		_ = conn.Close()
		return nil, errClosed
	}
	in.sess = s
	in.mu.Unlock()
	go s.read()
	in.log.Info("websocket connected", "url", in.shown)
	return s, nil
}

// read moves messages from the connection to frames until the connection
// ends or stop is closed.
func (s *session) read() {
	defer close(s.exited)
	for {
		kind, data, err := s.conn.ReadMessage()
		if err != nil {
			s.err = err
			close(s.frames)
			return
		}
		select {
		case s.frames <- frame{kind: kind, data: data}:
		case <-s.stop:
			s.err = errors.New("closed")
			close(s.frames)
			return
		}
	}
}

// end closes the connection; the reader then returns.
func (s *session) end() {
	s.once.Do(func() {
		close(s.stop)
		_ = s.conn.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		_ = s.conn.Close()
	})
}

// drop forgets s when it is still the live connection and closes it.
func (in *Input) drop(s *session) {
	in.mu.Lock()
	if in.sess == s {
		in.sess = nil
	}
	in.mu.Unlock()
	s.end()
}

// Read returns the messages already received, at least one, up to
// batch_size; it waits for the first. When the connection is lost it
// returns an error, and the next Read dials again. The AckFunc does
// nothing: the server cannot be told.
func (in *Input) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	s, err := in.session(ctx)
	if err != nil {
		return message.Batch{}, nil, err
	}
	var msgs []message.Message
	select {
	case f, ok := <-s.frames:
		if !ok {
			in.drop(s)
			in.log.Warn("websocket connection lost", "url", in.shown, "err", s.err)
			return message.Batch{}, nil, fmt.Errorf("websocket: connection to %s lost: %w", in.shown, s.err)
		}
		msgs = append(msgs, in.message(f))
	case <-ctx.Done():
		return message.Batch{}, nil, ctx.Err()
	}
	for len(msgs) < in.batchSize {
		select {
		case f, ok := <-s.frames:
			if !ok { // the next Read reports the end of the connection
				return message.Batch{Messages: msgs}, message.NoopAck, nil
			}
			msgs = append(msgs, in.message(f))
		default:
			return message.Batch{Messages: msgs}, message.NoopAck, nil
		}
	}
	return message.Batch{Messages: msgs}, message.NoopAck, nil
}

func (in *Input) message(f frame) message.Message {
	m := message.New(f.data)
	m.Meta.Source = in.shown
	m.Meta.IngestTime = time.Now()
	kind := "binary"
	if f.kind == websocket.TextMessage {
		kind = "text"
	}
	m.Meta.Fields = map[string]string{"websocket_message_type": kind}
	return m
}

// Close closes the connection (sending a normal close frame) and waits
// for its reader, bounded by ctx. Read and Connect fail afterwards.
func (in *Input) Close(ctx context.Context) error {
	in.mu.Lock()
	in.closed = true
	s := in.sess
	in.sess = nil
	in.mu.Unlock()
	if s == nil {
		return nil
	}
	s.end()
	select {
	case <-s.exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
