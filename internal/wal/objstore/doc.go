// Package objstore is the object-store backend of the write-ahead log: the
// same contract as package wal (Append is acknowledged once durable, Ack,
// Replay of what was not acknowledged before a restart, Read back), kept in
// a bucket (gocloud.dev/blob: s3:// or file://) instead of a directory.
//
// Appends are group-committed: whatever was appended while the previous
// PUTs were under way is cut into segments of at most MaxEntries entries and
// MaxBytes bytes, and each segment is stored with ONE PUT. An append is
// reported durable only after the PUT of its segment succeeded, so nothing
// acknowledged is in memory only. A failed PUT fails its entries (the caller
// gets them back) and leaves a gap in the sequence numbers; later appends go
// on.
//
// Keys, under the prefix:
//
//	seg/<first seq %020d>-<count %010d>   a segment (see EncodeSegment)
//	cursor                                every entry below it is acknowledged
//
// The cursor is written after CursorMaxEntries acknowledgements or every
// CursorInterval while it moves, and at Close; segments wholly below a
// written cursor are deleted. Open lists the segments, reads the cursor,
// verifies every segment at or past it and replays their entries: entries
// acknowledged after the last cursor write are replayed again
// (at-least-once). A segment that fails verification is skipped and counted
// in Recovery.CorruptSegments; its entries are lost.
//
// A prefix belongs to one open WAL at a time; nothing enforces it (the
// node_id and stream_id that make it up must be unique). The package must
// not know about streams, components or configuration files.
package objstore
