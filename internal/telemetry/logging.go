package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// NewLogger builds the process logger from the logging configuration. Logs
// go to stdout unless file_path names a file, which is opened for appending
// (created 0600 when absent). The returned closer closes that file.
//
// Every line is scrubbed of the values secrets knows, as they are when the
// line is written: the process adds the values of each configuration it
// runs to secrets, so a line logged later by a stream of that
// configuration (an error quoting a resolved path, say) shows
// config.Redacted in their place. nil secrets redacts nothing.
func NewLogger(c config.Logging, stdout io.Writer, secrets *config.Redactor) (*slog.Logger, io.Closer, error) {
	return NewLoggerIn(c, stdout, secrets, sandbox.FS{})
}

// NewLoggerIn is NewLogger opening the log file through fsys: a node
// running a Hub configuration opens the file_path it sets as the remote
// policy allows.
func NewLoggerIn(c config.Logging, stdout io.Writer, secrets *config.Redactor, fsys sandbox.FS) (*slog.Logger, io.Closer, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, nil, fmt.Errorf("logging.level: %w", err)
	}
	w, closer := stdout, io.Closer(nopCloser{})
	if c.FilePath != "" {
		f, err := fsys.OpenFile(c.FilePath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("logging.file_path: cannot open the log file: %w", err)
		}
		w, closer = f, f
	}
	if secrets != nil {
		w = RedactingWriter(w, secrets)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	if c.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	if secrets != nil {
		h = RedactingHandler(h, secrets)
	}
	return slog.New(h), closer, nil
}

// RedactingHandler returns a handler that scrubs the values of secrets from
// a record's message and attribute values (strings, errors, Stringers,
// other values as %+v) before h formats them. With [RedactingWriter] under
// h, this catches a value quoted before it was logged (an error holding
// "%q" of a path) that the format then escapes a second time, which the
// line alone would show in a form the redactor does not list.
func RedactingHandler(h slog.Handler, secrets *config.Redactor) slog.Handler {
	return &redactingHandler{h: h, secrets: secrets}
}

type redactingHandler struct {
	h       slog.Handler
	secrets *config.Redactor
}

func (r *redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return r.h.Enabled(ctx, l)
}

func (r *redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	if r.secrets.Len() == 0 {
		return r.h.Handle(ctx, rec)
	}
	out := slog.NewRecord(rec.Time, rec.Level, r.secrets.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.attr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r *redactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = r.attr(a)
	}
	return &redactingHandler{h: r.h.WithAttrs(red), secrets: r.secrets}
}

func (r *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{h: r.h.WithGroup(name), secrets: r.secrets}
}

func (r *redactingHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.secrets.String(v.String()))
	case slog.KindGroup:
		as := v.Group()
		red := make([]any, len(as))
		for i, g := range as {
			red[i] = r.attr(g)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, r.secrets.String(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, r.secrets.String(x.String()))
		default:
			s = fmt.Sprintf("%+v", x)
		}
		if red := r.secrets.String(s); red != s {
			return slog.String(a.Key, red)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// RedactingWriter returns a writer that scrubs the values of secrets from
// every write before passing it on to w.
//
// It redacts the formatted line rather than wrapping the slog.Handler:
// the line is where every attribute has become text (errors, values of
// any type, groups, the source), and escaped the way the format escapes
// it, which config.Forms covers (strconv.Quote for plain, JSON for json).
// The slog handlers write one record per Write call, so a value never
// straddles two writes.
func RedactingWriter(w io.Writer, secrets *config.Redactor) io.Writer {
	return &redactingWriter{w: w, secrets: secrets}
}

type redactingWriter struct {
	w       io.Writer
	secrets *config.Redactor
}

func (r *redactingWriter) Write(p []byte) (int, error) {
	if r.secrets.Len() == 0 {
		return r.w.Write(p)
	}
	if _, err := io.WriteString(r.w, r.secrets.String(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
