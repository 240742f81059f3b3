// Package message is the batch and message model shared by streams and jobs.
//
// A Message holds its payload bytes and, lazily, the structured value parsed
// from them; whichever side was written last is authoritative and the other
// is derived on demand. A Batch is either messages or an Apache Arrow
// table (its columnar form). The package does no I/O and must not import any other
// flowplane package.
package message
