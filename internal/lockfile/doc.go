// Package lockfile holds a process's exclusive claim on a directory or a
// file: the state directory of a node, a stream's WAL directory, the Hub's
// SQLite file. Two processes sharing one of them would corrupt it (two
// writers appending to one WAL, one configuration history climbing from
// both), so the second must fail at start-up, naming the holder.
//
// A Lock is an flock(2) on a lock file, which the kernel drops when the
// holding process ends, however it ends: a crashed or SIGKILLed holder
// never blocks a restart, and no stale lock needs removing. The holder's pid
// is written into the file so that the error can name it.
//
// The package must not know what it protects, and it must not remove lock
// files: unlinking a lock file while another process opens it would let
// two processes hold "the" lock at once.
package lockfile
