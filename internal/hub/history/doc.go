// Package history is the Hub's bounded, in-memory history of rates: for
// the fleet, each node, each stream and each job, the per-second rates of
// their counters (messages received, sent, errors; a job's records in and
// out) at a fixed step, for a fixed span, so that the console's charts
// open filled.
//
// A Recorder is fed counters by its owner at every step and turns two
// successive observations of a series into rates. It keeps at most Size
// points per series and MaxSeries series; it is lost when the Hub stops.
// It must not read the clock (the owner passes the time), do I/O or log:
// long-term history is Prometheus' job (scrape /metrics).
package history
