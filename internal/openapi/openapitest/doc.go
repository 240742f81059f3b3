// Package openapitest checks OpenAPI documents and the responses of a
// surface against its document, with a real validator
// (github.com/pb33f/libopenapi and libopenapi-validator). It is for tests
// only: importing it from non-test code would link the validator into the
// binary.
package openapitest
