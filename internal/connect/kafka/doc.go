// Package kafka holds the Kafka input and output (franz-go): consumer groups
// or explicit partitions, offsets committed after acknowledgement, an
// idempotent producer, and in jobs partition offsets in checkpoints and a
// transactional sink.
package kafka
