// Package state is the kernel's durable state: one embedded key-value store
// per task (Pebble), keyed by key group so that a subtask's state is a set
// of contiguous ranges; the live-state budget; and the artifact store where
// checkpoints and savepoints go (file:// and s3:// through gocloud.dev/blob),
// with the manifests that commit them and the retention that prunes them.
//
// It knows nothing of operators or records: values are bytes.
package state
