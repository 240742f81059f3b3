// Package objectstore: The object_store input (objects by prefix) and output (batches as objects under a path template) over gocloud.dev/blob: file://, s3:// and S3-compatible servers.
package objectstore
