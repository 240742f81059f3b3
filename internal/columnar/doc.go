// Package columnar converts between a batch's messages and its columnar
// form, an Apache Arrow table (message.Batch.Table), as ArkFlow's
// processors see batches.
//
// A batch of raw messages becomes the table ArkFlow calls binary: the
// column __value__ holding each payload, and __meta_* columns holding its
// metadata (FromMessages). JSON payloads become a table with one column
// per field, types inferred over the batch (FromJSON); a nested object or
// array, or a field whose values disagree in type, becomes a JSON column:
// utf8 text marked with the field metadata key JSONKey, written back as
// JSON rather than as a string. A table becomes messages again with
// Flatten: the __value__ column's bytes when the table has one, else each
// row as a JSON object, the __meta_* columns restoring the metadata.
package columnar
