package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/flowplane/flowplane/internal/wire"
)

// HandlerFunc is an API handler. It writes its success response itself and
// returns nil, or returns an error and writes nothing: an *Error (found with
// errors.As) becomes that problem, any other error a 500 internal whose cause
// is logged, never sent.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handler adapts h to http.Handler. Errors are written by WriteError; a
// panic is logged with its stack and answered 500 when nothing was written
// yet (http.ErrAbortHandler is re-panicked). A nil log means slog.Default().
func Handler(log *slog.Logger, h HandlerFunc) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(log, h, w, r)
	})
}

// FromHandler adapts a plain http.Handler (a metrics or file handler) so it
// can sit in a route table.
func FromHandler(h http.Handler) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		h.ServeHTTP(w, r)
		return nil
	}
}

func serve(log *slog.Logger, h HandlerFunc, w http.ResponseWriter, r *http.Request) {
	tw := &trackingWriter{ResponseWriter: w}
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler {
			panic(v)
		}
		log.LogAttrs(r.Context(), slog.LevelError, "http handler panicked",
			slog.String("correlation_id", CorrelationID(r.Context())),
			slog.String("method", r.Method),
			slog.String("route", r.Pattern),
			slog.String("panic", fmt.Sprint(v)),
			slog.String("stack", string(debug.Stack())))
		if !tw.wrote {
			writeProblem(w, r, internalError())
		}
	}()
	err := h(tw, r)
	switch {
	case err == nil:
	case tw.wrote:
		// The response is under way (often the client went away mid-write):
		// a problem can no longer be sent, so only log.
		log.LogAttrs(r.Context(), slog.LevelWarn, "http handler failed after writing its response",
			slog.String("correlation_id", CorrelationID(r.Context())),
			slog.String("method", r.Method),
			slog.String("route", r.Pattern),
			slog.String("error", err.Error()))
	default:
		WriteError(tw, r, log, err)
	}
}

func internalError() *Error {
	return NewError(http.StatusInternalServerError, CodeInternal,
		"internal error; quote the correlation id when reporting it")
}

// WriteError writes err as a problem envelope carrying the request's
// correlation id. A non-*Error is answered 500 internal with a generic
// message and logged with the correlation id; an *Error with status >= 500
// and a cause is logged too. Request headers are never logged.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	if log == nil {
		log = slog.Default()
	}
	var e *Error
	if !errors.As(err, &e) || e.Status < 400 || e.Status > 599 {
		log.LogAttrs(r.Context(), slog.LevelError, "http request failed",
			slog.String("correlation_id", CorrelationID(r.Context())),
			slog.String("method", r.Method),
			slog.String("route", r.Pattern),
			slog.String("error", err.Error()))
		e = internalError()
	} else if e.Status >= 500 && e.Cause != nil {
		log.LogAttrs(r.Context(), slog.LevelError, "http request failed",
			slog.String("correlation_id", CorrelationID(r.Context())),
			slog.String("method", r.Method),
			slog.String("route", r.Pattern),
			slog.String("code", e.Code),
			slog.String("error", e.Cause.Error()))
	}
	writeProblem(w, r, e)
}

// writeProblem writes e without logging.
func writeProblem(w http.ResponseWriter, r *http.Request, e *Error) {
	h := w.Header()
	for k, v := range e.Header {
		h[http.CanonicalHeaderKey(k)] = v
	}
	if e.Status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
		h.Set("WWW-Authenticate", "Bearer")
	}
	// Headers describing a success body must not leak onto a problem.
	h.Del("ETag")
	h.Del("Location")
	p := wire.Problem{
		Code:          e.Code,
		Message:       e.Message,
		CorrelationID: CorrelationID(r.Context()),
		Details:       e.Details,
	}
	// A Problem of strings and JSON-friendly details cannot fail to encode
	// unless a caller put a channel or func in Details; then drop them.
	if err := WriteJSON(w, e.Status, p); err != nil {
		p.Details = nil
		_ = WriteJSON(w, e.Status, p)
	}
}

// WriteJSON encodes v and writes it with status and Content-Type
// application/json. It encodes before writing anything, so an encoding error
// is returned with nothing written and the caller can return it as a 500.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("httpapi: encode response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// trackingWriter remembers whether the response was started, so a panic
// after a partial write does not try to write a second status line.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackingWriter) WriteHeader(code int) {
	t.wrote = true
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

// Flush lets streaming handlers (SSE) flush through the wrapper.
func (t *trackingWriter) Flush() {
	t.wrote = true
	_ = http.NewResponseController(t.ResponseWriter).Flush()
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
