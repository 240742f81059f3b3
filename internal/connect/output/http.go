package output

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/tracing"
)

func init() {
	component.Default.RegisterOutput(component.Spec{
		Name: "http",
		Summary: "Sends messages to an HTTP endpoint, one request per message or one JSON array per batch. " +
			"Connection errors, 5xx and 429 are retried `retry_count` times with a short capped backoff; " +
			"any other final non-2xx answer fails the batch. At-least-once, in a stream and in a job: after " +
			"a retry or a restore a message may be sent again, so the receiver should be idempotent.",
		Schema: component.ObjectSchema(map[string]any{
			"url": component.Prop("string", "Absolute http:// or https:// URL to send to.", nil),
			"method": func() map[string]any {
				p := component.Prop("string", "HTTP method.", "POST")
				p["enum"] = []any{"POST", "PUT", "PATCH", "DELETE", "GET"}
				return p
			}(),
			"headers": func() map[string]any {
				p := component.Prop("object", "Request headers (values may be secret references; they are never logged). "+
					"Content-Type defaults to application/json, or application/octet-stream for a "+
					"per_message payload that is not JSON.", map[string]any{})
				p["additionalProperties"] = map[string]any{"type": "string"}
				return p
			}(),
			"timeout_ms": func() map[string]any {
				p := component.Prop("integer", "Timeout of one request, in milliseconds.", 5000)
				p["minimum"] = 1
				return p
			}(),
			"retry_count": func() map[string]any {
				p := component.Prop("integer", "Retries of a request after a connection error, 5xx or 429, "+
					"with backoff 100ms, 200ms, 400ms ... capped at 1s.", 0)
				p["minimum"] = 0
				return p
			}(),
			"body": func() map[string]any {
				p := component.Prop("string", "`per_message`: one request per message, the payload as body; "+
					"`batch_json_array`: one request per batch whose body is a JSON array of the payloads "+
					"(a payload that is not JSON becomes a JSON string).", "per_message")
				p["enum"] = []any{"per_message", "batch_json_array"}
				return p
			}(),
		}, "url"),
		Example: `type: http
url: http://127.0.0.1:8080/ingest
method: POST
headers:
  X-Source: flowplane
timeout_ms: 5000
retry_count: 3
body: batch_json_array
`,
	}, NewHTTP)
}

var _ component.Output = (*HTTP)(nil)

// Body modes of the http output.
const (
	bodyPerMessage = "per_message"
	bodyJSONArray  = "batch_json_array"
)

// HTTPConfig is the configuration of the http output.
type HTTPConfig struct {
	URL        string            `json:"url"`
	Method     string            `json:"method"`
	Headers    map[string]string `json:"headers"`
	TimeoutMs  int               `json:"timeout_ms"`
	RetryCount int               `json:"retry_count"`
	Body       string            `json:"body"`
}

// StatusError is the final non-2xx answer of the endpoint.
type StatusError struct{ Code int }

func (e *StatusError) Error() string {
	return fmt.Sprintf("http output: endpoint answered %d %s", e.Code, http.StatusText(e.Code))
}

// ErrRequest wraps a request that got no answer (connection refused,
// timeout, ...). The URL is left out of the message: it may hold a token.
var ErrRequest = errors.New("http output: request failed")

// HTTP sends messages as HTTP requests.
type HTTP struct {
	conf      HTTPConfig
	host      string // for logs: the URL itself may hold credentials
	transport *http.Transport
	client    *http.Client
	log       *slog.Logger
	backoff   func(attempt int) time.Duration // tests shorten it
}

// NewHTTP builds an http output from its configuration.
func NewHTTP(conf map[string]any, res component.Resources) (component.Output, error) {
	c := HTTPConfig{Method: "POST", TimeoutMs: 5000, Body: bodyPerMessage}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	var errs []error
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL is not quoted back: it may hold a token.
		errs = append(errs, errors.New("url: must be an absolute http:// or https:// URL"))
	}
	switch c.Method {
	case "POST", "PUT", "PATCH", "DELETE", "GET":
	default:
		errs = append(errs, fmt.Errorf("method: %q is not one of POST, PUT, PATCH, DELETE, GET", c.Method))
	}
	if c.TimeoutMs < 1 {
		errs = append(errs, errors.New("timeout_ms: must be at least 1"))
	}
	if c.RetryCount < 0 {
		errs = append(errs, errors.New("retry_count: must not be negative"))
	}
	switch c.Body {
	case bodyPerMessage, bodyJSONArray:
	default:
		errs = append(errs, fmt.Errorf("body: %q is not per_message or batch_json_array", c.Body))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	tr := res.Net.HTTPTransport(nil)
	return &HTTP{
		conf:      c,
		host:      u.Host,
		transport: tr,
		client:    &http.Client{Transport: tr, Timeout: time.Duration(c.TimeoutMs) * time.Millisecond},
		log:       res.Logger,
		backoff:   defaultBackoff,
	}, nil
}

func defaultBackoff(attempt int) time.Duration {
	return min(100*time.Millisecond<<min(attempt, 10), time.Second)
}

// Connect does nothing: connections are made per request.
func (o *HTTP) Connect(context.Context) error { return nil }

// Write sends b. With per_message, a failure stops at the failing message
// and the runtime sends the whole batch again (at-least-once).
func (o *HTTP) Write(ctx context.Context, b message.Batch) error {
	if b.Len() == 0 {
		return ctx.Err()
	}
	if o.conf.Body == bodyJSONArray {
		body, err := jsonArray(b)
		if err != nil {
			return err
		}
		return o.send(ctx, body, "application/json")
	}
	for i := range b.Messages {
		p, err := b.Messages[i].Payload()
		if err != nil {
			return fmt.Errorf("http output: %w", err)
		}
		ct := "application/json"
		if !json.Valid(p) {
			ct = "application/octet-stream"
		}
		if err := o.send(ctx, p, ct); err != nil {
			return err
		}
	}
	return nil
}

// send makes one request, retrying connection errors, 5xx and 429.
func (o *HTTP) send(ctx context.Context, body []byte, contentType string) error {
	for attempt := 0; ; attempt++ {
		err := o.do(ctx, body, contentType)
		if err == nil || !retryable(err) || attempt >= o.conf.RetryCount {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		o.log.Debug("http output retrying", "host", o.host, "attempt", attempt+1, "error", err)
		t := time.NewTimer(o.backoff(attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

func retryable(err error) bool {
	if component.IsPermanent(err) {
		return false // the node's policy refused the destination
	}
	if se, ok := errors.AsType[*StatusError](err); ok {
		return se.Code >= 500 || se.Code == http.StatusTooManyRequests
	}
	return errors.Is(err, ErrRequest)
}

func (o *HTTP) do(ctx context.Context, body []byte, contentType string) error {
	req, err := http.NewRequestWithContext(ctx, o.conf.Method, o.conf.URL, bytes.NewReader(body))
	if err != nil {
		return errors.New("http output: could not build the request")
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range o.conf.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	// A traced batch's request carries the output span's W3C context.
	if tp, ts, ok := tracing.Headers(ctx); ok {
		req.Header.Set(tracing.TraceParent, tp)
		if ts != "" {
			req.Header.Set(tracing.TraceState, ts)
		}
	}
	resp, err := o.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // url.Error's text quotes the URL
		}
		return fmt.Errorf("%w: %w", ErrRequest, err)
	}
	// Drain a little so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{Code: resp.StatusCode}
	}
	return nil
}

// jsonArray renders the payloads of b as one JSON array; payloads that are
// not JSON become JSON strings.
func jsonArray(b message.Batch) ([]byte, error) {
	out := make([]byte, 0, b.Bytes()+b.Len()+2)
	out = append(out, '[')
	for i := range b.Messages {
		p, err := b.Messages[i].Payload()
		if err != nil {
			return nil, fmt.Errorf("http output: %w", err)
		}
		if i > 0 {
			out = append(out, ',')
		}
		if json.Valid(p) {
			out = append(out, p...)
			continue
		}
		s, err := json.Marshal(string(p))
		if err != nil {
			return nil, fmt.Errorf("http output: %w", err)
		}
		out = append(out, s...)
	}
	return append(out, ']'), nil
}

// Close releases idle connections.
func (o *HTTP) Close(context.Context) error {
	o.transport.CloseIdleConnections()
	return nil
}
