// Package processor holds the built-in stream processors (json, mapping,
// filter, batch, log). Each lives in its own file and registers itself into
// component.Default from init().
//
// Processors transform the batch they are handed and return the result
// synchronously; they may change its messages in place (the runtime keeps a
// copy of the original for error_output) but must not mutate structured
// values (maps and slices) they did not create, because copies of a message
// share them. Processors must not hold messages across calls, acknowledge
// anything, or do I/O other than logging. The one exception is batch, a
// component.Batcher: it gathers across input batches, and the stream drives
// it like a buffer (Write with the input's AckFunc, Read with the merged
// batch's) so that acknowledgements follow the messages.
package processor
