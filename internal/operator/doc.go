// Package operator holds the contract every job operator implements and
// the built-in transforming operators: map, filter, aggregate, window and
// udf. Source and sink operators wrap components and live in the kernel.
//
// Operators are called from one task goroutine only and hold no locks. They
// do no I/O of their own beyond the state tables the kernel hands them.
//
// Expressions (map, filter, keys, aggregations) are expr-lang, compiled by
// package expression as the mapping and filter processors compile theirs,
// with the record's value as `this`.
//
// # Aggregations
//
// count, sum, min, max, avg, first and last; numbers are float64 and a
// value that is not a number fails sum, min, max and avg. first and last
// are the values of the records with the earliest and latest time (ties:
// the first and last to arrive), so a window's result does not depend on
// the order its records arrived in.
//
// # Keyed state
//
// aggregate and window keep their live state in Go maps and write the keys
// changed since the last checkpoint into their table (aggregate: table
// "aggregate", window: table "windows") at Snapshot, under the canonical
// key in its key group; Open reads back the subtask's key groups. Each
// entry is a version byte then varints, fixed 8-byte floats and
// length-prefixed JSON (codec.go): part of the state format.
//
// # Windows
//
// Results are {"key", "window_start", "window_end", <aggregation names>}
// with Time window_end-1. A window fires when the watermark reaches
// window_end-1 (policy update) or window_end-1+allowed_lateness_ms (drop,
// route); under update it is kept until the latter and fires again at once
// for each record it still takes. Sessions are [first, last+gap_ms):
// records less than gap_ms apart share one.
//
// # udf ABI
//
// A udf module is WebAssembly run by wazero with WASI preview1 and nothing
// else: no files, no network, no environment or arguments, a fake clock,
// at most 128 MiB of memory; a call ends when the task's context does. A
// reactor's _initialize runs once at Open. The module exports:
//
//	alloc(size i32) -> i32           a buffer of size bytes the host writes the input into
//	<function>(ptr i32, len i32) -> i64
//
// For each record the host calls alloc with the length of the record's
// value as JSON, writes the JSON there and calls the function with that
// pointer and length. The function returns out_ptr<<32 | out_len: where
// in its memory the result's JSON is. The result becomes the record's
// value (its time is kept); JSON null drops the record; anything else that
// is not JSON fails the task. Both buffers belong to the module and need to
// stay valid only until the host's next call. In Go (1.24+), build with
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared and export with
// //go:wasmexport (testdata/udf/upper/main.go is an example).
package operator
