package telemetry

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/flowplane/flowplane/internal/config"
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
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, nil, fmt.Errorf("logging.level: %w", err)
	}
	w, closer := stdout, io.Closer(nopCloser{})
	if c.FilePath != "" {
		f, err := os.OpenFile(c.FilePath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
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
	return slog.New(h), closer, nil
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
