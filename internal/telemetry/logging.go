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
func NewLogger(c config.Logging, stdout io.Writer) (*slog.Logger, io.Closer, error) {
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
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	if c.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h), closer, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
