package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"go.yaml.in/yaml/v3"
)

// Format is a configuration file format.
type Format string

// The formats a configuration may be written in.
const (
	YAML Format = "yaml"
	JSON Format = "json"
	TOML Format = "toml"
)

// ErrFormat reports an unsupported file extension or format name.
var ErrFormat = errors.New("unsupported configuration format")

// FormatOf returns the format of a file by its extension.
func FormatOf(path string) (Format, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		return YAML, nil
	case ".json":
		return JSON, nil
	case ".toml":
		return TOML, nil
	}
	return "", fmt.Errorf("%w: %q has extension %q; use .yaml, .yml, .json or .toml", ErrFormat, filepath.Base(path), filepath.Ext(path))
}

// ParseFormat accepts a format name as used by the control plane.
func ParseFormat(s string) (Format, error) {
	switch Format(strings.ToLower(s)) {
	case YAML, "yml":
		return YAML, nil
	case JSON:
		return JSON, nil
	case TOML:
		return TOML, nil
	}
	return "", fmt.Errorf("%w: %q; use yaml, json or toml", ErrFormat, s)
}

// MaxSize bounds a configuration document.
const MaxSize = 4 << 20

// Tree decodes a document into a generic value tree of map[string]any,
// []any, string, float64, bool and nil: the JSON data model, whatever the
// source format.
func Tree(data []byte, f Format) (any, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("configuration is larger than %d bytes", MaxSize)
	}
	var v any
	switch f {
	case YAML:
		dec := yaml.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&v); err != nil && !errors.Is(err, io.EOF) {
			return nil, &syntaxError{format: YAML, err: err}
		}
		var extra any
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			return nil, errors.New("yaml: a configuration is a single document")
		}
	case JSON:
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("json: %w", err)
		}
		if dec.More() {
			return nil, errors.New("json: unexpected data after the configuration object")
		}
	case TOML:
		if err := toml.Unmarshal(data, &v); err != nil {
			return nil, &syntaxError{format: TOML, err: err}
		}
	default:
		return nil, fmt.Errorf("%w: %q", ErrFormat, f)
	}
	if v == nil {
		v = map[string]any{}
	}
	if f == JSON {
		return v, nil // already the JSON data model
	}
	// Normalise through JSON: YAML gives ints and map[string]any with
	// possibly non-string keys rejected, TOML gives int64 and time values.
	norm, err := normalize(v)
	if err != nil {
		return nil, err
	}
	return norm, nil
}

// syntaxError is a parser's error, shown once prefixed with its format:
// the YAML and TOML parsers prefix their own messages already, which read
// "yaml: yaml: line 1: ..." when wrapped.
type syntaxError struct {
	format Format
	err    error
}

func (e *syntaxError) Error() string {
	prefix := string(e.format) + ": "
	msg := e.err.Error()
	var te *yaml.TypeError
	var de *toml.DecodeError
	switch {
	case errors.As(e.err, &te):
		// "yaml: unmarshal errors:\n  line 2: ..." on one line.
		msg = strings.Join(te.Errors, "; ")
	case errors.As(e.err, &de):
		row, col := de.Position()
		msg = fmt.Sprintf("line %d, column %d: %s", row, col, strings.TrimPrefix(msg, prefix))
	}
	return prefix + strings.TrimPrefix(msg, prefix)
}

func (e *syntaxError) Unwrap() error { return e.err }

func normalize(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("configuration holds a value JSON cannot represent: %w", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ReadFile reads a configuration file and its format.
func ReadFile(path string) ([]byte, Format, error) {
	f, err := FormatOf(path)
	if err != nil {
		return nil, "", err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read configuration: %w", err)
	}
	return data, f, nil
}
