// Package sqlpipe benchmarks the sql processor's pipeline (json_to_arrow
// -> sql -> arrow_to_json) against the same work done with mapping and
// filter. It holds only benchmarks and their check; nothing imports it.
package sqlpipe
