package httpapi

// Doc describes a route for its API document (internal/openapi builds the
// OpenAPI document of a route table from it). Types are given as Go values
// of the wire type (wire.Stream{}, []wire.Event{}, ...), so the document's
// schemas are reflected from the types the handlers encode: there is no
// second, hand-written description to drift.
type Doc struct {
	// Summary is one line saying what the route does.
	Summary string
	// Tag groups routes in the document ("streams", "agent", "probes"...).
	Tag string
	// Request is a value of the request body's type; nil means the route
	// reads no body. RequestOptional says a bodiless request is as good.
	Request         any
	RequestOptional bool
	// RequestMedia are the accepted request media types; empty means
	// application/json only. Configuration routes add YAML and TOML, whose
	// body is the raw document (a string).
	RequestMedia []string
	// Status is the success status; 0 means 200.
	Status int
	// Response is a value of the success body's type; nil means no body
	// (204), unless ResponseMedia names a non-JSON body.
	Response any
	// ResponseMedia is the success body's media type when it is not
	// application/json: "text/plain" (Prometheus metrics),
	// "text/event-stream" (server-sent events), "text/html".
	ResponseMedia string
	// AltResponse, when set, is the same success status also answered as
	// application/json with this body (GET /metrics?format=json).
	AltResponse any
	// Also are further statuses answered with the Response body, such as
	// 503 of a readiness probe that is not ready.
	Also []int
	// Query are the query parameters the route reads.
	Query []Param
	// Paged adds the page and page_size parameters of a collection.
	Paged bool
	// Problems are the route's own error statuses (404 of an unknown
	// resource, 409, 412, 422...); the statuses every route of its kind can
	// answer (400 invalid_header, 401, 413, 415, 500...) are added by the
	// document builder.
	Problems []int
	// Security names the security scheme of the route ("" = the
	// surface's default; public routes have none).
	Security string
	// ETag and Location say which headers the success response carries.
	ETag, Location bool
	// IfMatch says the route honours If-Match (412 generation_conflict).
	IfMatch bool
}

// Param is one query parameter of a route.
type Param struct {
	Name        string
	Type        string // "string" (default), "integer", "boolean"
	Description string
	Enum        []string
	Required    bool
}

// AnyOf is a Doc.Request or Doc.Response body that takes the form of any
// of several types (a configuration body: the document itself, or the
// {"format", "content"} envelope).
type AnyOf []any
