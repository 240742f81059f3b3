// Package input holds the built-in stream inputs (generate, memory, file,
// http, stdin). Each lives in its own file and registers itself into
// component.Default from init().
//
// Inputs only produce batches and learn their fate through the AckFunc they
// hand out; they must not process, buffer across streams, or write anywhere.
// Nothing here knows about the stream runtime or the configuration loader.
package input
