// Package objectstore holds the object_store input (objects by prefix, read
// in key order) and output (batches as objects under a path template) over
// gocloud.dev/blob: file://, s3:// and S3-compatible servers. It keeps
// nothing outside the bucket: which objects an input has read lives in
// memory (and, in a job, in its checkpointed position).
package objectstore
