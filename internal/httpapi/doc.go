// Package httpapi is the HTTP plumbing shared by every flowplane API surface
// (the node API, the Hub operator API and the Hub agent API): one route
// table per surface over net/http's ServeMux, handlers that return errors,
// the problem envelope for every error (404 and 405 included), JSON bodies,
// correlation ids, bearer authentication, CORS, pagination, generations
// (ETag / If-Match), Idempotency-Key replay, and the server every listener
// uses (timeouts and connection caps, server.go). The rules it enforces are
// written down in docs/api-conventions.md.
//
// It must not know about streams, jobs, nodes or the Hub: resource-specific
// codes (stream_not_found, ...) and handlers belong to the surfaces that use
// it. It never logs request headers, so tokens cannot reach a log.
package httpapi
