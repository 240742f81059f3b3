// Package multi is the multiple_inputs input: it reads several child
// inputs concurrently and merges their batches into one stream, each
// batch keeping its own child's acknowledgement, so the children's
// delivery guarantees hold unchanged. It must not hold batches of its own
// beyond the one per child waiting to be read, nor acknowledge anything
// itself.
package multi
