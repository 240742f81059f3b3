// Package objectstore holds the object_store input (objects by prefix) and
// output (batches as objects under a path template) over gocloud.dev/blob.
package objectstore
