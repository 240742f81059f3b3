package objectstore

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/flowplane/flowplane/internal/message"
)

// The codecs: how the messages of a batch become one object and back.
const (
	codecLines     = "lines"      // one payload per line
	codecJSONArray = "json_array" // one JSON array, one element per message
	codecWhole     = "whole"      // input only: the object is one message
)

// gzipSuffix ends the keys of gzip-compressed objects.
const gzipSuffix = ".gz"

// encode renders the payloads of b in codec, gzip-compressed with zip.
// json_array embeds a payload that is valid JSON as it is and any other
// as a JSON string, so that no payload can make the batch unwritable.
func encode(codec string, zip bool, b message.Batch) ([]byte, error) {
	var buf bytes.Buffer
	for i := range b.Messages {
		p, err := b.Messages[i].Payload()
		if err != nil {
			return nil, err
		}
		switch codec {
		case codecJSONArray:
			if i == 0 {
				buf.WriteByte('[')
			} else {
				buf.WriteByte(',')
			}
			if json.Valid(p) {
				buf.Write(p)
			} else {
				q, _ := json.Marshal(string(p))
				buf.Write(q)
			}
		default:
			buf.Write(p)
			buf.WriteByte('\n')
		}
	}
	if codec == codecJSONArray {
		buf.WriteString("]\n")
	}
	if !zip {
		return buf.Bytes(), nil
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	if _, err := w.Write(buf.Bytes()); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return z.Bytes(), nil
}

// decodeAll splits a whole (already decompressed) object into records for
// the codecs that need all of it: json_array and whole.
func decodeAll(codec string, data []byte) ([][]byte, error) {
	if codec == codecWhole {
		return [][]byte{data}, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(data, &elems); err != nil {
		return nil, fmt.Errorf("not a JSON array: %w", err)
	}
	out := make([][]byte, len(elems))
	for i, e := range elems {
		out[i] = e
	}
	return out, nil
}

// pathTemplate is the output's object key template: literal text and
// {{placeholder}}s, rendered once per batch.
type pathTemplate struct {
	parts []tmplPart
}

type tmplPart struct {
	lit string
	ph  string // placeholder name; empty for literal text
}

// placeholders are the names a path template may use.
var placeholders = []string{"count", "uuid", "timestamp_unix_nano", "timestamp_unix", "date", "stream"}

// pathPattern is the schema's check of a path template: every {{ opens a
// known placeholder. parsePathTemplate checks the rest.
const pathPattern = `^(?:[^{]|\{[^{]|\{$|\{\{ *(?:count|uuid|timestamp_unix_nano|timestamp_unix|date|stream) *\}\})*$`

// parsePathTemplate parses s, naming field in errors.
func parsePathTemplate(field, s string) (pathTemplate, error) {
	var t pathTemplate
	rest := s
	for rest != "" {
		i := strings.Index(rest, "{{")
		if i < 0 {
			t.parts = append(t.parts, tmplPart{lit: rest})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, tmplPart{lit: rest[:i]})
		}
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			return pathTemplate{}, fmt.Errorf("%s: %q has an unclosed {{", field, s)
		}
		name := strings.TrimSpace(rest[i+2 : i+2+j])
		known := false
		for _, p := range placeholders {
			known = known || p == name
		}
		if !known {
			return pathTemplate{}, fmt.Errorf("%s: unknown placeholder {{%s}}; known are {{%s}}",
				field, name, strings.Join(placeholders, "}}, {{"))
		}
		t.parts = append(t.parts, tmplPart{ph: name})
		rest = rest[i+2+j+2:]
	}
	if len(t.parts) == 0 {
		return pathTemplate{}, fmt.Errorf("%s: must not be empty", field)
	}
	if strings.HasPrefix(s, "/") {
		return pathTemplate{}, fmt.Errorf("%s: %q must not start with /: keys are relative to the bucket URL", field, s)
	}
	hasPh := false
	for _, p := range t.parts {
		hasPh = hasPh || p.ph != "" && p.ph != "stream" && p.ph != "date"
	}
	if !hasPh {
		return pathTemplate{}, fmt.Errorf("%s: %q would write every batch to the same object; use {{uuid}}, {{timestamp_unix_nano}} or {{count}}", field, s)
	}
	return t, nil
}

// render returns the key of batch number count (1-based) written at now.
func (t pathTemplate) render(count int64, now time.Time, stream string) string {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.ph {
		case "":
			b.WriteString(p.lit)
		case "count":
			b.WriteString(strconv.FormatInt(count, 10))
		case "uuid":
			b.WriteString(uuid.NewString())
		case "timestamp_unix_nano":
			b.WriteString(strconv.FormatInt(now.UnixNano(), 10))
		case "timestamp_unix":
			b.WriteString(strconv.FormatInt(now.Unix(), 10))
		case "date":
			b.WriteString(now.UTC().Format(time.DateOnly))
		case "stream":
			b.WriteString(stream)
		}
	}
	return b.String()
}
