package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// MediaTypeJSON is the media type of every JSON body.
const MediaTypeJSON = "application/json"

// DefaultMaxBodyBytes caps request bodies when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes int64 = 1 << 20

// ReadBody reads r's body, at most maxBytes of it (maxBytes <= 0 adds no
// cap of its own; a Router has already capped every body). A non-empty body
// must be sent with one of mediaTypes (parameters other than
// charset=utf-8 are ignored), else 415 unsupported_media_type; a body over
// the cap is 413 body_too_large. It returns the bare media type ("" when the
// header is absent and the body empty) and the body, possibly empty.
func ReadBody(r *http.Request, maxBytes int64, mediaTypes ...string) (string, []byte, error) {
	mt, err := checkMediaType(r.Header.Get("Content-Type"), mediaTypes)
	if err != nil {
		return "", nil, err
	}
	if r.Body == nil {
		return mt, nil, nil
	}
	rd := r.Body
	if maxBytes > 0 {
		rd = http.MaxBytesReader(nil, r.Body, maxBytes)
	}
	body, err := io.ReadAll(rd)
	if err != nil {
		return "", nil, bodyReadError(err)
	}
	if mt == "" && len(body) > 0 {
		return "", nil, UnsupportedMediaType(mediaTypes...)
	}
	return mt, body, nil
}

func bodyReadError(err error) error {
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return BodyTooLarge(mbe.Limit).WithCause(err)
	}
	return BadRequest(CodeInvalidJSON, "could not read the request body").WithCause(err)
}

// checkMediaType returns the bare media type of header when it is one of
// accepted, "" when header is empty, or a 415.
func checkMediaType(header string, accepted []string) (string, error) {
	if header == "" {
		return "", nil
	}
	mt, params, err := mime.ParseMediaType(header)
	if err != nil {
		return "", UnsupportedMediaType(accepted...).WithCause(err)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return "", UnsupportedMediaType(accepted...)
	}
	for _, a := range accepted {
		if mt == a {
			return mt, nil
		}
	}
	return "", UnsupportedMediaType(accepted...)
}

// DecodeJSON decodes r's required JSON body into into: Content-Type must be
// application/json (415), the body at most maxBytes (413, see ReadBody), not
// empty, not null, one JSON value without trailing data and without fields
// into does not have (400 invalid_json, naming the field).
func DecodeJSON(r *http.Request, into any, maxBytes int64) error {
	present, err := DecodeOptionalJSON(r, into, maxBytes)
	if err == nil && !present {
		return BadRequest(CodeInvalidJSON, "a JSON request body is required")
	}
	return err
}

// DecodeOptionalJSON is DecodeJSON for endpoints whose body may be omitted:
// an empty body leaves into untouched and returns false.
func DecodeOptionalJSON(r *http.Request, into any, maxBytes int64) (bool, error) {
	_, body, err := ReadBody(r, maxBytes, MediaTypeJSON)
	if err != nil {
		return false, err
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return false, nil
	}
	if bytes.Equal(trimmed, []byte("null")) {
		return true, BadRequest(CodeInvalidJSON, "the request body must not be null")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return true, jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return true, BadRequest(CodeInvalidJSON, "unexpected data after the JSON value")
	}
	return true, nil
}

// jsonError turns a decoding error into a 400 whose message names the
// position or field but never echoes values or Go type names.
func jsonError(err error) *Error {
	if syn, ok := errors.AsType[*json.SyntaxError](err); ok {
		return badJSON(fmt.Sprintf("malformed JSON at byte %d", syn.Offset), nil, err)
	}
	if typ, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		want := jsonKind(typ.Type.Kind().String())
		got, _, _ := strings.Cut(typ.Value, " ") // "number -5": keep the kind only
		if typ.Field == "" {
			return badJSON(fmt.Sprintf("the request body must be %s, not %s", want, got), nil, err)
		}
		return badJSON(fmt.Sprintf("field %q must be %s, not %s", typ.Field, want, got),
			map[string]any{"field": typ.Field}, err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return badJSON("malformed JSON: unexpected end of body", nil, err)
	}
	// encoding/json has no typed error for an unknown field; its message is
	// `json: unknown field "name"`, and only the quoted name is reused.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		field := strings.Trim(name, `"`)
		return badJSON(fmt.Sprintf("unknown field %q", field), map[string]any{"field": field}, err)
	}
	return badJSON("malformed JSON", nil, err)
}

func badJSON(msg string, details map[string]any, cause error) *Error {
	e := BadRequest(CodeInvalidJSON, msg).WithCause(cause)
	e.Details = details
	return e
}

// jsonKind names a Go kind as the JSON type a client should send.
func jsonKind(kind string) string {
	switch kind {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	default:
		return "another type"
	}
}
