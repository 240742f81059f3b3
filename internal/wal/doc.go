// Package wal is the per-stream write-ahead log that makes a stream durable.
//
// A stream appends every batch it reads (Append or AppendAsync) and lets it
// into the pipeline once the append is durable; a stream whose pipeline fell
// behind reads older entries back from the files with a Reader instead of
// holding them in memory. It acknowledges the entry (Ack) once an output
// accepted the batch. After a restart, Replay hands back every entry that was
// not acknowledged, in order.
//
// On disk a WAL is a directory of segment files named by the sequence number
// of their first entry ("%020d.wal"). A segment is a run of records
//
//	[len u32][crc32c u32][seq u64][kind u8][payload: len bytes]   (little endian)
//
// where the CRC-32C covers the payload followed by len, seq and kind. A record
// is an entry, an ack record (a set of acknowledged sequence numbers) or a
// checkpoint (every sequence number below N that is still unacknowledged).
// Every segment starts with a checkpoint made durable before any older
// segment may be deleted, so acknowledgements recorded in a deleted segment
// are never lost. Acknowledgements are at-least-once: an ack is on disk
// after the next commit (an append, the sync interval tick or Close); an
// entry acknowledged just before a crash may be replayed again.
//
// Recovery verifies every record. A bad record in the last segment is a torn
// or unsynced tail: the file is truncated there, which never drops a record
// that was reported durable. A bad record in an older segment (which was
// fsynced whole before the next one began) is damage: recovery keeps the
// records before it, skips the rest of that file, keeps the later segments,
// and names the file in Recovery.CorruptSegment; the file is left as it is
// for inspection and is deleted like any other once its surviving entries
// are acknowledged.
//
// The package must not know about streams, components or configuration
// files: it stores opaque byte entries (plus a codec for message batches).
// A directory belongs to one open WAL at a time: Open holds an flock on
// its lock file until Close (see internal/lockfile), and a second Open, in
// this process or another, fails with ErrInUse naming the holder's pid.
package wal
