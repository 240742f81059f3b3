// Package history is a node's durable configuration history: the versions
// v1, v2, ... (append-only), the applied pointer and one working draft,
// kept in <state dir>/config, plus Diff, the unified line diff the Node API
// shows between two texts.
//
// It stores text exactly as written, secret references included; it must
// not resolve references, parse or validate configurations, know about
// HTTP or the engine, or call time.Now (Open takes the clock, SaveDraft the
// time).
//
// # Layout
//
//	index.json              {"layout":1,"applied":"v3","versions":[metadata, oldest first]}
//	versions/v<n>.<ext>     the text of version n; ext is yaml, json or toml
//	draft.json              {"layout":1,"format","sha256","updated_at"}
//	draft-<sha[:16]>.<ext>  the draft's text, named by its hash
//
// Files are 0600, directories 0700.
//
// # Sources
//
// A version's source says where it came from: "file" (the --config file,
// through Boot), "api" (an apply through the Node API), "rollback" (an
// earlier version's text re-applied; rolled_back_from names it) or "hub"
// (a configuration_apply from the Hub; hub_version holds the Hub's own id
// of it, "v3", which is not the node's id). hub_version is present on hub
// versions only and rolled_back_from on rollback versions only; index
// files of releases without hub versions stay valid as they are. A hub
// version's text is the Hub's, secret references kept: the values the Hub
// resolved for them are never written here.
//
// # Durability
//
// Every file is written by one protocol: temporary file (".tmp-" prefix)
// in the same directory, fsync, rename over the target, fsync of the
// directory. Text is written before the record that points to it: an
// append writes versions/v<n> and then index.json; a draft writes its
// hash-named text and then draft.json, and only then removes the old text.
// A crash therefore leaves either the old or the new state, plus at most
// an orphan text and temporary files; Open removes those (version texts
// numbered past the index, draft texts draft.json does not name, ".tmp-"
// files). Boot appends and applies in one index write, so a changed file
// is never recorded without being applied.
//
// A write that fails before its rename changes nothing (in memory or on
// disk). One that fails after (the directory fsync) may or may not have
// reached the disk: the store then reflects the renamed file, returns
// ErrStorage and refuses every later write until it is reopened, the
// usual answer to an fsync failure.
//
// # Corruption is an error, never a reset
//
// Open checks the index (JSON, layout, ids v1..vN in order, formats,
// sources, rollback references, Hub version ids, applied pointer) and reads every version
// text, comparing its SHA-256 with the index. Any problem, as well as a
// missing index.json beside existing files or a draft.json whose text is
// missing or altered, fails Open with ErrCorrupt and a message naming the
// file (an I/O failure while reading is ErrStorage instead). Nothing is
// rewritten or deleted then; the operator restores the file or moves the
// directory away. Get and Applied read the text again and report later
// tampering the same way.
//
// # Boot
//
// Boot compares the --config file with the latest version whose source is
// "file", by SHA-256 and format. Equal: the applied version runs (it may
// be an api, rollback or hub version applied after the file). Different: the
// file becomes a new version and is applied, even when its text equals an
// older file version or an api version, because editing the file is the
// operator's newest decision. The file's path only labels errors; it is
// not stored, since paths must not reach API clients.
//
// # Memory and bounds
//
// The store keeps the versions' metadata and the draft in memory; version
// texts stay on disk and are read by Get and Applied. List therefore
// returns metadata with a nil Content. Each text is at most
// config.MaxSize; Actor and CorrelationID at most 1 KiB of UTF-8. Every
// version is kept (the history is append-only), so the directory grows
// with each apply, and each write rewrites index.json (a few hundred
// bytes per version).
//
// A Store is safe for concurrent use: one mutex guards its state and its
// files. The Store itself does not stop two processes from opening the
// same directory: the node does, by locking its whole state directory
// (node.LockStateDir) before it opens the history.
//
// # Diff
//
// Diff is Myers' O(ND) algorithm in its linear-space form (middle snake,
// recursion), written here to avoid a dependency, on lines that keep
// their "\n" (so "x" and "x\n" differ). Output follows GNU diff -u: 3
// lines of context, hunks at most 6 unchanged lines apart merged, "-0,0"
// style ranges for empty sides, "\ No newline at end of file" markers.
// Past 4096 edits in one region the search stops and the region is shown
// as replaced whole, bounding the cost on large unrelated texts; the
// output is always an exact patch from a to b.
package history
