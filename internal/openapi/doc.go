// Package openapi builds the OpenAPI 3.1 document of an API surface from
// its route table (httpapi.Route and its Doc) and the Go types its handlers
// encode, reflected into JSON Schema 2020-12: one source of truth, no
// hand-written schema to drift from the code. Named struct types become
// components/schemas referenced by $ref; the output is deterministic (keys
// sorted, byte-identical across runs), so it can be golden-tested and
// served with a stable ETag.
//
// It must not know about nodes, streams, jobs or the Hub: a surface passes
// its routes, its security schemes and the explicit schemas of types whose
// JSON form reflection cannot see (custom MarshalJSON). It validates
// nothing: checking documents and responses is openapitest's job, for
// tests only, so the binary carries no validator.
package openapi
