// Package objectstore holds the object_store input (objects under a key
// prefix, read in key order) and output (each batch one object under a
// path template) over gocloud.dev/blob: file://, s3:// and S3-compatible
// servers. It does not keep anything outside the bucket: which objects an
// input has read lives in memory (and, in a job, in its checkpointed
// position).
package objectstore
