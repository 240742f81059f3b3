package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/wire"
)

// Version is the OpenAPI version of every document.
const Version = "3.1.0"

// Dialect is the JSON Schema dialect of the documents' schemas.
const Dialect = "https://json-schema.org/draft/2020-12/schema"

// Info describes the surface a document is built for.
type Info struct {
	Title       string
	Version     string
	Description string
	// Prefix is the path every documented route starts with ("/api/v1" on
	// the Hub, "" on a node). The server entry names it and paths are
	// written relative to it; routes outside it (the Hub's probes and
	// console) are not part of the document.
	Prefix string
	// Security are the surface's security schemes by name; the routes'
	// Doc.Security name one, DefaultSecurity the one of every other
	// route that is not public.
	Security        map[string]SecurityScheme
	DefaultSecurity string
	// CommonProblems are error statuses every route of the surface may
	// answer besides those the builder derives (503 recovering on the Hub).
	CommonProblems []int
	// Types are the explicit schemas of types with their own JSON form.
	Types map[reflect.Type]TypeSchema
}

// SecurityScheme is an HTTP bearer scheme.
type SecurityScheme struct {
	Description string
}

// Documented reports whether a route of pattern belongs to the document of
// a surface with prefix.
func Documented(prefix, pattern string) bool {
	return prefix == "" || strings.HasPrefix(pattern, prefix+"/")
}

// Path is the document's path of a route pattern: relative to prefix, the
// ServeMux's {$} and trailing-wildcard forms removed.
func Path(prefix, pattern string) string {
	p := strings.TrimPrefix(pattern, prefix)
	p = strings.ReplaceAll(p, "{$}", "")
	p = strings.ReplaceAll(p, "...}", "}")
	if p == "" {
		p = "/"
	}
	return p
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// Build returns the OpenAPI document of routes as indented JSON.
func Build(info Info, routes []httpapi.Route) ([]byte, error) {
	r := newReflector(info.Types)
	// Defined first, the envelope is "Problem" whatever else is named so.
	problem := r.define(reflect.TypeFor[wire.Problem]())
	paths := map[string]Schema{}
	for _, rt := range routes {
		if !Documented(info.Prefix, rt.Pattern) {
			continue
		}
		p := Path(info.Prefix, rt.Pattern)
		item := paths[p]
		if item == nil {
			item = Schema{}
			paths[p] = item
		}
		method := strings.ToLower(rt.Method)
		if _, dup := item[method]; dup {
			return nil, fmt.Errorf("openapi: %s %s twice", rt.Method, p)
		}
		item[method] = operation(r, info, rt, p)
	}
	if r.err != nil {
		return nil, r.err
	}
	schemes := Schema{}
	for name, s := range info.Security {
		schemes[name] = Schema{"type": "http", "scheme": "bearer", "description": s.Description}
	}
	server := info.Prefix
	if server == "" {
		server = "/"
	}
	r.defs[problem] = problemSchema(r.defs[problem])
	doc := Schema{
		"openapi":           Version,
		"jsonSchemaDialect": Dialect,
		"info":              Schema{"title": info.Title, "version": info.Version, "description": info.Description},
		"servers":           []any{Schema{"url": server}},
		"paths":             paths,
		"components": Schema{"schemas": r.defs, "securitySchemes": schemes, "responses": Schema{
			"Problem": Schema{"description": "An error, as the problem envelope.",
				"content": Schema{httpapi.MediaTypeJSON: Schema{"schema": Schema{"$ref": "#/components/schemas/" + problem}}}},
		}},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return buf.Bytes(), nil
}

// problemSchema is the reflected wire.Problem with the descriptions of
// the envelope's fields (docs/api-conventions.md).
func problemSchema(s Schema) Schema {
	s = copySchema(s)
	s["description"] = "The problem envelope of every error (docs/api-conventions.md)."
	props := copySchema(s["properties"].(Schema))
	describe := func(name, text string) {
		p := copySchema(props[name].(Schema))
		p["description"] = text
		props[name] = p
	}
	describe("code", "A stable, machine-readable code such as not_found or validation_failed.")
	describe("message", "For humans; never holds a secret, a token or a file path.")
	describe("correlation_id", "The request's X-Correlation-ID.")
	describe("details", "Code-specific data, e.g. errors: [{path, message}] of validation_failed.")
	s["properties"] = props
	return s
}

// operation is the Operation Object of one route.
func operation(r *reflector, info Info, rt httpapi.Route, path string) Schema {
	d := rt.Doc
	op := Schema{
		"operationId": operationID(rt.Method, path),
		"responses":   responses(r, info, rt),
	}
	if d.Summary != "" {
		op["summary"] = d.Summary
	}
	if d.Tag != "" {
		op["tags"] = []any{d.Tag}
	}
	var params []any
	for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
		params = append(params, Schema{"name": m[1], "in": "path", "required": true, "schema": Schema{"type": "string"}})
	}
	if d.Paged {
		params = append(params,
			Schema{"name": "page", "in": "query", "description": "Page number, from 1.",
				"schema": Schema{"type": "integer", "minimum": 1, "maximum": httpapi.MaxPage, "default": 1}},
			Schema{"name": "page_size", "in": "query", "description": "Items per page.",
				"schema": Schema{"type": "integer", "minimum": 1, "maximum": httpapi.MaxPageSize, "default": httpapi.DefaultPageSize}})
	}
	for _, q := range d.Query {
		typ := q.Type
		if typ == "" {
			typ = "string"
		}
		s := Schema{"type": typ}
		if len(q.Enum) > 0 {
			s["enum"] = toAny(q.Enum)
		}
		p := Schema{"name": q.Name, "in": "query", "schema": s}
		if q.Description != "" {
			p["description"] = q.Description
		}
		if q.Required {
			p["required"] = true
		}
		params = append(params, p)
	}
	if d.IfMatch {
		params = append(params, Schema{"name": "If-Match", "in": "header",
			"description": `"generation-<n>" (or W/"generation-<n>", or *): answer 412 generation_conflict unless it is the current generation.`,
			"schema":      Schema{"type": "string"}})
	}
	if mutation(rt.Method) && !rt.NoIdempotencyKey {
		params = append(params, Schema{"name": "Idempotency-Key", "in": "header",
			"description": "Replays the first response of the same key, route and body for 24 h.",
			"schema":      Schema{"type": "string", "maxLength": 255}})
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if d.Request != nil {
		content := Schema{}
		media := d.RequestMedia
		if len(media) == 0 {
			media = []string{httpapi.MediaTypeJSON}
		}
		for _, m := range media {
			if m == httpapi.MediaTypeJSON {
				content[m] = Schema{"schema": r.of(d.Request)}
			} else {
				content[m] = Schema{"schema": Schema{"type": "string", "description": "The raw configuration document."}}
			}
		}
		op["requestBody"] = Schema{"required": !d.RequestOptional, "content": content}
	}
	switch {
	case rt.Public:
		op["security"] = []any{}
	case d.Security != "":
		op["security"] = []any{Schema{d.Security: []any{}}}
	case info.DefaultSecurity != "":
		op["security"] = []any{Schema{info.DefaultSecurity: []any{}}}
	}
	return op
}

// responses are the success response and every problem status the route
// can answer.
func responses(r *reflector, info Info, rt httpapi.Route) Schema {
	d := rt.Doc
	status := d.Status
	if status == 0 {
		status = http.StatusOK
	}
	out := Schema{}
	ok := Schema{"description": http.StatusText(status)}
	content := Schema{}
	switch {
	case d.ResponseMedia != "":
		content[d.ResponseMedia] = Schema{"schema": Schema{"type": "string"}}
		if d.AltResponse != nil {
			content[httpapi.MediaTypeJSON] = Schema{"schema": r.of(d.AltResponse)}
		}
	case d.Response != nil:
		content[httpapi.MediaTypeJSON] = Schema{"schema": r.of(d.Response)}
	}
	if len(content) > 0 {
		ok["content"] = content
	}
	headers := Schema{}
	if d.ETag {
		headers["ETag"] = Schema{"description": `"generation-<n>" of the resource.`, "schema": Schema{"type": "string"}}
	}
	if d.Location {
		headers["Location"] = Schema{"description": "The created resource or operation.", "schema": Schema{"type": "string"}}
	}
	if len(headers) > 0 {
		ok["headers"] = headers
	}
	out[strconv.Itoa(status)] = ok
	for _, s := range d.Also {
		also := copySchema(ok)
		also["description"] = http.StatusText(s)
		delete(also, "headers")
		if s == http.StatusNotModified {
			delete(also, "content")
		}
		out[strconv.Itoa(s)] = also
	}
	for _, s := range problemStatuses(info, rt) {
		if _, taken := out[strconv.Itoa(s)]; taken {
			continue
		}
		out[strconv.Itoa(s)] = Schema{"$ref": "#/components/responses/Problem"}
	}
	return out
}

// problemStatuses are the error statuses a route can answer: its own, the
// surface's common ones, and those every route of its kind shares.
func problemStatuses(info Info, rt httpapi.Route) []int {
	st := []int{http.StatusBadRequest, http.StatusInternalServerError} // invalid_header; a bug
	st = append(st, info.CommonProblems...)
	st = append(st, rt.Doc.Problems...)
	if !rt.Public {
		// 401 without a valid credential; 403 for a Host that is neither
		// loopback nor the listener while no token protects the route.
		st = append(st, http.StatusUnauthorized, http.StatusForbidden)
	}
	if mutation(rt.Method) {
		// Cross-origin refusal, body cap, media type.
		st = append(st, http.StatusForbidden, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType)
		if !rt.NoIdempotencyKey {
			st = append(st, http.StatusConflict) // idempotency_key_reused, idempotency_key_in_use
		}
		if rt.Doc.Request != nil || rt.Doc.RequestOptional {
			st = append(st, http.StatusUnprocessableEntity)
		}
	}
	if rt.Doc.IfMatch {
		st = append(st, http.StatusPreconditionFailed)
	}
	slices.Sort(st)
	return slices.Compact(st)
}

func mutation(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// operationID is method and path in camel case: GET /streams/{id}/start is
// getStreamsIdStart.
func operationID(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	up := true
	for _, c := range path {
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
			if up && c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			b.WriteRune(c)
			up = false
		default:
			up = true
		}
	}
	return b.String()
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func sortedStrings(ss []string) []any {
	ss = slices.Clone(ss)
	slices.Sort(ss)
	return toAny(ss)
}
