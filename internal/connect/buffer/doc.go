// Package buffer holds the built-in stream buffers (memory, tumbling_window,
// sliding_window, session_window). Each lives in its own file and registers
// itself into component.Default from init().
//
// A buffer sits between the input and the processors and regroups batches
// on processing time. Whatever it emits carries an AckFunc that acknowledges
// each input batch it contains exactly once, and only after every emitted
// batch holding any of its messages was acknowledged; an error given to an
// emitted batch's AckFunc reaches the input acks. Buffers hold messages only
// in memory, bounded in messages and payload bytes: a Write that would go
// beyond the bound waits (back-pressure) until an emitted batch made room.
// They must not persist, process, or acknowledge anything early.
package buffer
