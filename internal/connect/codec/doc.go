// Package codec holds the codecs an input or output names in its `codec`
// field (json, lines, csv, protobuf, avro, schema_registry,
// debezium_json) and the protobuf_to_arrow and arrow_to_protobuf
// processors, which share the protobuf codec's descriptor loading and
// conversion.
//
// A codec's Decode turns the payloads an input read into the batch the
// stream carries (a Table for every codec but lines); Encode turns what
// reaches an output, Messages or a Table, into Messages whose payloads are
// the encoded records. The package does no I/O beyond reading descriptor
// and schema files at build time and, for schema_registry, fetching
// schemas by id from the registry.
package codec
