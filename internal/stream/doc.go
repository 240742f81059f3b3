// Package stream is the runtime of one stream: it reads batches from an
// input, optionally passes them through a buffer (and a leading
// component.Batcher processor, driven like a second buffer: stage.go), runs
// them through the processors on thread_num workers, and writes the results to the output in
// input order (or routes failed batches to error_output). It gives
// at-least-once delivery: an input batch is acknowledged with nil only after
// everything made from it was accepted downstream. It bounds the batches in
// flight (back-pressure), retries output failures with capped exponential
// backoff, can put a write-ahead log in front of the pipeline (which then
// acknowledges the input once a batch is durable and feeds the pipeline from
// the log, riding out output outages up to a bound), and reports its state
// and counters.
//
// It must not read configuration or build components: the caller (the
// engine) constructs every component and hands them over in a Config. It
// must not know concrete component types.
package stream
