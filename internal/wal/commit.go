package wal

import (
	"fmt"
	"os"
	"slices"
	"time"
)

// run is the committer: the only goroutine that writes segment files.
func (w *WAL) run() {
	defer close(w.done)
	defer func() {
		if err := w.lock.Release(); err != nil {
			w.log.Warn("release WAL lock", "err", err)
		}
	}()
	tick := time.NewTicker(w.opts.SyncInterval)
	defer tick.Stop()
	for {
		select {
		case <-w.wake:
		case <-tick.C:
			w.tick()
			continue
		}
		for {
			w.mu.Lock()
			buf, items, acks, closed := w.buf, w.items, w.acks, w.closed
			w.buf, w.items, w.acks = w.spareBuf, w.spareItems, w.spareAcks
			w.mu.Unlock()
			w.spareBuf, w.spareItems, w.spareAcks = nil, nil, nil
			empty := len(items) == 0 && len(acks) == 0
			if !empty {
				w.commit(buf, items, acks)
			}
			w.recycle(buf, items, acks)
			if empty {
				if closed {
					w.finish()
					return
				}
				break
			}
		}
	}
}

// maxSpare bounds the buffer kept between rounds.
const maxSpare = 4 << 20

// recycle keeps a round's buffers for the appenders of a later round.
func (w *WAL) recycle(buf []byte, items []pendingEntry, acks []uint64) {
	clear(items) // drop the channels
	if cap(buf) > maxSpare {
		buf = nil
	}
	w.spareBuf, w.spareItems, w.spareAcks = buf[:0], items[:0], acks[:0]
}

// commit writes one round of appended entries and queued acks.
func (w *WAL) commit(buf []byte, items []pendingEntry, acks []uint64) {
	if w.hookCommit != nil {
		w.hookCommit()
	}
	if w.failed == nil && len(acks) > 0 {
		w.writeAcks(acks)
	}
	if w.failed != nil {
		notify(items, w.failed)
		return
	}
	if len(items) == 0 {
		w.publish() // the ack records' bytes; the next fsync covers them
		return
	}
	if w.opts.Sync == SyncPerEntry {
		w.commitEach(buf, items)
		return
	}
	w.commitGroup(buf, items)
}

// commitEach writes and fsyncs the entries one at a time (per_entry).
func (w *WAL) commitEach(buf []byte, items []pendingEntry) {
	prev := 0
	for k, it := range items {
		var err error
		if w.entries > 0 && w.size+int64(it.end-prev) > w.opts.SegmentBytes {
			err = w.rotate(it.seq)
		}
		if err == nil {
			err = w.writeEntries(buf[prev:it.end], it.seq, 1)
		}
		prev = it.end
		if err == nil {
			err = w.sync()
		}
		if err != nil {
			w.fail(err)
			notify(items[k:], w.failed)
			return
		}
		w.publish()
		it.ch <- nil
	}
}

// commitGroup writes the entries with as few writes as segment boundaries
// allow, then (group_commit) fsyncs once, then reports them all.
func (w *WAL) commitGroup(buf []byte, items []pendingEntry) {
	start, prev, n := 0, 0, uint64(0)
	for _, it := range items {
		if w.entries+n > 0 && w.size+int64(it.end-start) > w.opts.SegmentBytes {
			if err := w.writeEntries(buf[start:prev], it.seq-n, n); err != nil {
				w.failRound(err, items)
				return
			}
			w.publish()
			if err := w.rotate(it.seq); err != nil {
				w.failRound(err, items)
				return
			}
			start, n = prev, 0
		}
		prev = it.end
		n++
	}
	if err := w.writeEntries(buf[start:prev], items[len(items)-1].seq+1-n, n); err != nil {
		w.failRound(err, items)
		return
	}
	if w.opts.Sync == SyncGroupCommit {
		if err := w.sync(); err != nil {
			w.failRound(err, items)
			return
		}
	}
	w.publish()
	notify(items, nil)
}

// writeEntries appends n entry records, the first being seq, to the active
// segment.
func (w *WAL) writeEntries(b []byte, seq, n uint64) error {
	if n == 0 {
		return nil
	}
	if _, err := w.f.Write(b); err != nil {
		return fmt.Errorf("wal: write entries %d..%d: %w", seq, seq+n-1, err)
	}
	w.size += int64(len(b))
	w.entries += n
	w.dirty = true
	return nil
}

// writeAcks writes ack records for acks (which it sorts) to the active segment.
func (w *WAL) writeAcks(acks []uint64) {
	slices.Sort(acks)
	b := w.ackBuf[:0]
	for len(acks) > 0 {
		k := min(len(acks), maxAcksPerRecord)
		p := appendAckPayload(nil, acks[:k])
		b = appendRecord(b, kindAck, 0, payloadCRC(p), p)
		acks = acks[k:]
	}
	w.ackBuf = b
	if _, err := w.f.Write(b); err != nil {
		w.fail(fmt.Errorf("wal: write acks: %w", err))
		return
	}
	w.size += int64(len(b))
	w.dirty = true
}

// tick writes queued acks and fsyncs what was written since the last fsync.
func (w *WAL) tick() {
	if w.failed != nil {
		return
	}
	w.mu.Lock()
	acks := w.acks
	w.acks = w.spareAcks
	w.mu.Unlock()
	w.spareAcks = nil
	if len(acks) > 0 {
		w.writeAcks(acks)
		w.publish()
	}
	w.spareAcks = acks[:0]
	if w.dirty && w.failed == nil {
		if err := w.sync(); err != nil {
			w.fail(err)
		}
	}
}

// publish makes the active segment's written entries visible to Ack.
func (w *WAL) publish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.segs[len(w.segs)-1]
	if w.entries > s.n {
		s.grow(w.entries)
		w.written = s.first + s.n
		for seq := range w.early {
			if s.contains(seq) {
				s.ack(seq)
				delete(w.early, seq)
			}
		}
	}
	s.size = w.size
}

// rotate fsyncs and closes the active segment and starts the one whose first
// entry will be next. The new segment opens with a checkpoint that is
// durable before the old segment may be deleted.
func (w *WAL) rotate(next uint64) error {
	if w.dirty {
		if err := w.sync(); err != nil {
			return err
		}
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("wal: close segment: %w", err)
	}
	w.f = nil
	f, err := os.OpenFile(segPath(w.opts.Dir, next), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("wal: create segment: %w", err)
	}
	w.f, w.size, w.entries = f, 0, 0
	if err := w.writeCheckpoint(next); err != nil {
		return err
	}
	if err := w.syncDir(); err != nil {
		return err
	}
	w.mu.Lock()
	old := w.segs[len(w.segs)-1]
	w.segs = append(w.segs, &segment{first: next, size: w.size})
	drop := old.done()
	if drop {
		w.segs = slices.Delete(w.segs, len(w.segs)-2, len(w.segs)-1)
	}
	w.mu.Unlock()
	if drop {
		w.remove(old)
	}
	return nil
}

// writeCheckpoint appends and fsyncs a checkpoint of every unacknowledged
// entry below next.
func (w *WAL) writeCheckpoint(next uint64) error {
	w.mu.Lock()
	var unacked []seqRange
	for _, s := range w.segs {
		unacked = s.appendUnacked(unacked, next)
	}
	w.mu.Unlock()
	p := appendCheckpointPayload(nil, next, unacked)
	b := appendRecord(nil, kindCheckpoint, 0, payloadCRC(p), p)
	if _, err := w.f.Write(b); err != nil {
		return fmt.Errorf("wal: write checkpoint: %w", err)
	}
	w.size += int64(len(b))
	w.dirty = true
	return w.sync()
}

func (w *WAL) sync() error {
	if err := fdatasync(w.f); err != nil {
		return fmt.Errorf("wal: fsync: %w", err)
	}
	w.fsyncs.Add(1)
	w.dirty = false
	return nil
}

func (w *WAL) syncDir() error {
	d, err := os.Open(w.opts.Dir)
	if err != nil {
		return fmt.Errorf("wal: fsync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("wal: fsync dir: %w", err)
	}
	w.fsyncs.Add(1)
	return nil
}

// fail puts the WAL in its failed state: nothing is written any more, since
// after a failed write or fsync the file's contents are unknown. Open
// recovers what is intact.
func (w *WAL) fail(err error) {
	if w.failed != nil {
		return
	}
	w.failed = err
	w.log.Error("WAL write failed; appends fail until reopened", "err", err)
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
}

func (w *WAL) failRound(err error, items []pendingEntry) {
	w.fail(err)
	notify(items, w.failed)
}

// finish runs once, after Close: it fsyncs and closes the active segment.
func (w *WAL) finish() {
	w.closeErr = w.failed
	if w.f == nil {
		return
	}
	if w.failed == nil && w.dirty {
		w.closeErr = w.sync()
	}
	if err := w.f.Close(); err != nil && w.closeErr == nil {
		w.closeErr = fmt.Errorf("wal: close segment: %w", err)
	}
}

func notify(items []pendingEntry, err error) {
	for _, it := range items {
		it.ch <- err
	}
}
