package input

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

func init() {
	component.Default.RegisterInput(component.Spec{
		Name: "file",
		Summary: "Reads a file line by line (`lines`, `json` documents or `csv` rows), once or following " +
			"appended lines like `tail -f`. In a stream, delivery is at-least-once within a run: a failed batch " +
			"is read again, but no offset is persisted, so a restart reads the file from its beginning. In a " +
			"job, the byte offset of the next line (and the CSV header) is checkpointed and a restored job " +
			"continues from it; the input runs at parallelism 1 (it cannot be split).",
		Schema: component.ObjectSchema(map[string]any{
			"path": component.Prop("string", "Path of the file to read.", nil),
			"format": func() map[string]any {
				p := component.Prop("string", "`lines`: each line is a message; `json`: each line is a JSON document "+
					"(invalid lines are logged and skipped); `csv`: the first line is the header and each "+
					"following row becomes a JSON object of header to string value (one record per line).", "lines")
				p["enum"] = []any{"lines", "json", "csv"}
				return p
			}(),
			"follow": component.Prop("boolean", "Keep reading lines appended to the file instead of ending at its end. "+
				"A file that shrinks is read again from its beginning.", false),
			"poll_interval": component.DurationProp("How often a followed file is checked for new lines.", "250ms"),
			"batch_size":    batchSizeProp(),
		}, "path"),
		Example: `type: file
path: /dev/null
format: lines
follow: false
batch_size: 100
`,
	}, NewFile)
}

var _ component.Replayable = (*File)(nil)

// FileConfig is the configuration of the file input.
type FileConfig struct {
	Path         string `json:"path"`
	Format       string `json:"format"`
	Follow       bool   `json:"follow"`
	PollInterval string `json:"poll_interval"`
	BatchSize    int    `json:"batch_size"`
}

// File formats.
const (
	formatLines = "lines"
	formatJSON  = "json"
	formatCSV   = "csv"
)

// File reads a file line by line. Without follow it ends at the end of the
// file; with follow it polls for appended lines until closed.
type File struct {
	path      string
	format    string
	follow    bool
	poll      time.Duration
	batchSize int
	log       *slog.Logger
	redo      redelivery

	fs        sandbox.FS // the file is opened through it
	closeOnce sync.Once
	closed    chan struct{} // closed by Close; wakes a polling Read

	// Owned by the goroutine that calls Connect and Read.
	f       *os.File
	r       *bufio.Reader
	partial []byte // the start of a line whose newline has not arrived
	offset  int64  // file offset of the next line
	header  []string
	timer   *time.Timer
}

// NewFile builds a file input from its configuration. It does not open the
// file: Connect does.
func NewFile(conf map[string]any, res component.Resources) (component.Input, error) {
	c := FileConfig{Format: formatLines, PollInterval: "250ms", BatchSize: 1}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("path: required"))
	}
	switch c.Format {
	case formatLines, formatJSON, formatCSV:
	default:
		errs = append(errs, fmt.Errorf("format: %q is not one of lines, json, csv", c.Format))
	}
	poll, err := parseDuration("poll_interval", c.PollInterval)
	if err != nil {
		errs = append(errs, err)
	} else if poll == 0 {
		errs = append(errs, errors.New("poll_interval: must be positive"))
	}
	if err := checkBatchSize(c.BatchSize); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &File{
		path: c.Path, format: c.Format, follow: c.Follow, poll: poll, batchSize: c.BatchSize,
		log:    res.Logger,
		fs:     res.FS,
		redo:   redelivery{log: res.Logger, source: c.Path},
		closed: make(chan struct{}),
	}, nil
}

// Connect opens the file; a missing file is an error.
func (f *File) Connect(context.Context) error {
	// A local path that cannot be read (missing, a directory, not
	// permitted) is the configuration's problem: fail the stream rather
	// than retry.
	fh, err := f.fs.Open(f.path)
	if err != nil {
		return component.Permanent(fmt.Errorf("file input: %w", err))
	}
	if fi, err := fh.Stat(); err == nil && fi.IsDir() {
		fh.Close()
		return component.Permanent(fmt.Errorf("file input: %s is a directory", f.path))
	}
	f.f, f.r = fh, bufio.NewReaderSize(fh, 64<<10)
	return nil
}

// Read returns up to batch_size messages. Without follow it returns
// message.ErrEndOfInput at the end of the file; with follow it waits for
// more lines. It never waits to fill a batch once it has a message.
func (f *File) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if f.r == nil {
		return message.Batch{}, nil, errors.New("file input: Read before Connect")
	}
	if b, ok := f.redo.next(); ok {
		return b, f.redo.ackFor(b), nil
	}
	var msgs []message.Message
	for len(msgs) < f.batchSize {
		if err := ctx.Err(); err != nil {
			return message.Batch{}, nil, err
		}
		select {
		case <-f.closed:
			return message.Batch{}, nil, errInputClosed
		default:
		}
		line, start, ok, err := f.readLine()
		if err != nil {
			return message.Batch{}, nil, err
		}
		if ok {
			if m, keep := f.toMessage(line, start); keep {
				msgs = append(msgs, m)
			}
			continue
		}
		// At the current end of the file.
		if len(msgs) > 0 {
			break
		}
		if !f.follow {
			if f.redo.end() {
				return message.Batch{}, nil, message.ErrEndOfInput
			}
			b, _ := f.redo.next()
			return b, f.redo.ackFor(b), nil
		}
		if err := f.checkTruncated(); err != nil {
			return message.Batch{}, nil, err
		}
		if err := f.sleep(ctx); err != nil {
			return message.Batch{}, nil, err
		}
		if b, ok := f.redo.next(); ok {
			return b, f.redo.ackFor(b), nil
		}
	}
	b := message.Batch{Messages: msgs}
	return b, f.redo.ackFor(b), nil
}

// readLine returns the next complete line without its line ending and the
// file offset it starts at; ok is false at the current end of the file.
// Without follow, a last line lacking its newline is complete at the end.
func (f *File) readLine() (line []byte, start int64, ok bool, err error) {
	data, err := f.r.ReadBytes('\n')
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		f.partial = append(f.partial, data...)
		if f.follow || len(f.partial) == 0 {
			return nil, 0, false, nil
		}
		data = nil
	default:
		return nil, 0, false, f.fail(err)
	}
	if len(f.partial) > 0 {
		data, f.partial = append(f.partial, data...), nil
	}
	start = f.offset
	f.offset += int64(len(data))
	data = bytes.TrimSuffix(data, []byte("\n"))
	data = bytes.TrimSuffix(data, []byte("\r"))
	return data, start, true, nil
}

// toMessage turns a line into a message in the configured format; keep is
// false for lines that are skipped (blank json/csv lines, invalid lines,
// the csv header).
func (f *File) toMessage(line []byte, start int64) (message.Message, bool) {
	switch f.format {
	case formatJSON:
		if len(bytes.TrimSpace(line)) == 0 {
			return message.Message{}, false
		}
		if !json.Valid(line) {
			f.log.Warn("skipping a line that is not JSON", "path", f.path, "offset", start)
			return message.Message{}, false
		}
	case formatCSV:
		if len(bytes.TrimSpace(line)) == 0 {
			return message.Message{}, false
		}
		rec, err := parseCSVLine(line)
		if err != nil {
			f.log.Warn("skipping a line that is not CSV", "path", f.path, "offset", start, "error", err)
			return message.Message{}, false
		}
		if f.header == nil {
			f.header = rec
			return message.Message{}, false
		}
		if len(rec) != len(f.header) {
			f.log.Warn("skipping a CSV row whose field count differs from the header",
				"path", f.path, "offset", start, "fields", len(rec), "header_fields", len(f.header))
			return message.Message{}, false
		}
		line = csvObject(f.header, rec)
	}
	m := message.New(line)
	m.Meta.Source = f.path
	m.Meta.Offset = start
	return m, true
}

// checkTruncated starts over from the beginning when the file became
// shorter than what was read (truncated or replaced by a shorter file).
func (f *File) checkTruncated() error {
	st, err := f.f.Stat()
	if err != nil {
		return f.fail(err)
	}
	if st.Size() >= f.offset+int64(len(f.partial)) {
		return nil
	}
	f.log.Warn("file shrank; reading it again from the beginning", "path", f.path)
	if _, err := f.f.Seek(0, io.SeekStart); err != nil {
		return f.fail(err)
	}
	f.r.Reset(f.f)
	f.partial, f.offset, f.header = nil, 0, nil
	return nil
}

// fail wraps a file error, or reports errInputClosed when Close closed the
// file under a following Read.
func (f *File) fail(err error) error {
	select {
	case <-f.closed:
		return errInputClosed
	default:
		return fmt.Errorf("file input: %w", err)
	}
}

// sleep waits one poll interval, or until ctx ends or the input is closed.
func (f *File) sleep(ctx context.Context) error {
	if f.timer == nil {
		f.timer = time.NewTimer(f.poll)
	} else {
		f.timer.Reset(f.poll)
	}
	select {
	case <-f.timer.C:
		return nil
	case <-ctx.Done():
		f.timer.Stop()
		return ctx.Err()
	case <-f.closed:
		f.timer.Stop()
		return errInputClosed
	}
}

// filePosition is the checkpointed position of a file input.
type filePosition struct {
	// Offset is the byte offset of the next unread line.
	Offset int64 `json:"offset"`
	// Header is the CSV header once read (csv format only).
	Header []string `json:"header,omitempty"`
}

// Position returns the offset of the next unread line and, for csv, the
// header read so far. A line whose newline has not arrived yet (follow) is
// not counted as read.
func (f *File) Position() ([]byte, error) {
	return json.Marshal(filePosition{Offset: f.offset, Header: f.header})
}

// Seek moves the opened file to a Position. An offset beyond the end of
// the file means the file was truncated or replaced since the checkpoint,
// which is an error: reading on from elsewhere would not replay the same
// data.
func (f *File) Seek(_ context.Context, pos []byte) error {
	if f.f == nil {
		return errors.New("file input: Seek before Connect")
	}
	var p filePosition
	if err := json.Unmarshal(pos, &p); err != nil {
		return fmt.Errorf("file input: position %s: %w", pos, err)
	}
	st, err := f.f.Stat()
	if err != nil {
		return fmt.Errorf("file input: %w", err)
	}
	if p.Offset < 0 || p.Offset > st.Size() {
		return fmt.Errorf("file input: checkpointed offset %d is outside %s (%d bytes); was the file truncated or replaced?",
			p.Offset, f.path, st.Size())
	}
	if _, err := f.f.Seek(p.Offset, io.SeekStart); err != nil {
		return fmt.Errorf("file input: %w", err)
	}
	f.r.Reset(f.f)
	f.partial, f.offset, f.header = nil, p.Offset, nil
	if f.format == formatCSV {
		f.header = p.Header
	}
	return nil
}

// Close closes the file and wakes a Read waiting for appended lines.
func (f *File) Close(context.Context) error {
	var err error
	f.closeOnce.Do(func() {
		close(f.closed)
		if f.f != nil {
			err = f.f.Close()
		}
	})
	return err
}

// errInputClosed is returned by a Read interrupted by Close.
var errInputClosed = errors.New("input closed")

func parseCSVLine(line []byte) ([]string, error) {
	r := csv.NewReader(bytes.NewReader(line))
	r.FieldsPerRecord = -1
	return r.Read()
}

// csvObject renders a CSV row as a JSON object, keys in header order.
func csvObject(header, rec []string) []byte {
	b := make([]byte, 0, 64)
	b = append(b, '{')
	for i, h := range header {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(h) // marshaling a string cannot fail
		v, _ := json.Marshal(rec[i])
		b = append(b, k...)
		b = append(b, ':')
		b = append(b, v...)
	}
	return append(b, '}')
}
