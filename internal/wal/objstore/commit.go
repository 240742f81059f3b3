package objstore

import (
	"context"
	"sort"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// run is the committer: it cuts what was appended into segments and starts
// their PUTs, at most Workers at a time. Appends made while PUTs are under
// way queue up and go into the next segments: that is the group commit.
// After Close it stores what is left, waits for the PUTs and exits.
func (w *WAL) run() {
	defer close(w.done)
	for range w.wake {
		w.mu.Lock()
		for w.inflight < w.opts.Workers && len(w.queue) > 0 {
			k, size := 0, int64(0)
			for k < len(w.queue) && k < w.opts.MaxEntries {
				n := int64(len(w.queue[k].data)) + 4
				if k > 0 && size+n > w.opts.MaxBytes {
					break
				}
				size += n
				k++
			}
			batch := w.queue[:k:k]
			w.queue = w.queue[k:]
			if len(w.queue) == 0 {
				w.queue = nil // let the old array go
			}
			w.inflight++
			w.puts.Add(1)
			go w.put(batch)
		}
		exit := w.closed && len(w.queue) == 0 && w.inflight == 0
		w.mu.Unlock()
		if exit {
			return
		}
	}
}

// put stores one segment with one PUT, then reports its entries.
func (w *WAL) put(batch []pending) {
	defer w.puts.Done()
	first, n := batch[0].seq, uint64(len(batch))
	entries := make([][]byte, len(batch))
	for i, p := range batch {
		entries[i] = p.data
	}
	s := segInfo{first: first, count: n, key: w.segKey(first, n)}
	data, err := EncodeSegment(first, entries, w.opts.Compression)
	if err == nil && w.hookPut != nil {
		err = w.hookPut(s.key)
	}
	if err == nil {
		err = w.b.WriteAll(w.ctx, s.key, data, &blob.WriterOptions{ContentType: "application/octet-stream"})
	}
	w.mu.Lock()
	w.inflight--
	if err != nil {
		w.nfailed++
		for _, p := range batch {
			w.gone[p.seq] = struct{}{} // never stored: the cursor may pass it
		}
		w.npending -= n
		w.advance()
	} else {
		w.nputs++
		i := sort.Search(len(w.segs), func(i int) bool { return w.segs[i].first > first })
		w.segs = append(w.segs, segInfo{})
		copy(w.segs[i+1:], w.segs[i:])
		w.segs[i] = s
	}
	w.mu.Unlock()
	if err != nil {
		w.log.Warn("WAL segment PUT failed; its appends fail", "key", s.key, "entries", n, "err", err)
	}
	for _, p := range batch {
		p.ch <- err
	}
	signal(w.wake)
}

// cursorLoop writes the cursor when enough acknowledgements came in, when
// CursorInterval passed and it moved, and once more after the committer
// exited (Close).
func (w *WAL) cursorLoop() {
	defer close(w.cdone)
	t := time.NewTicker(w.opts.CursorInterval)
	defer t.Stop()
	for {
		final := false
		select {
		case <-w.cwake:
		case <-t.C:
		case <-w.done:
			final = true
		}
		w.writeCursor()
		if final {
			return
		}
	}
}

// writeCursor writes the cursor if it moved, then deletes the segments
// wholly below it.
func (w *WAL) writeCursor() {
	w.mu.Lock()
	c := w.low
	if c == w.written {
		w.mu.Unlock()
		return
	}
	acks := w.sinceCur
	w.sinceCur = 0
	w.mu.Unlock()
	if err := w.b.WriteAll(w.ctx, w.cursorKey(), encodeCursor(c), nil); err != nil {
		w.log.Warn("cannot write the WAL cursor; acknowledged entries may be replayed after a restart", "err", err)
		w.mu.Lock()
		w.sinceCur += acks
		w.mu.Unlock()
		return
	}
	w.mu.Lock()
	w.written = c
	k := 0
	for k < len(w.segs) && w.segs[k].end() <= c {
		k++
	}
	drop := append([]segInfo(nil), w.segs[:k]...)
	w.segs = append(w.segs[:0:0], w.segs[k:]...)
	w.mu.Unlock()
	for _, s := range drop {
		w.remove(w.ctx, s)
	}
}

// remove deletes a segment wholly below the cursor. A failure only leaves
// it behind: the next Open deletes it.
func (w *WAL) remove(ctx context.Context, s segInfo) {
	if err := w.b.Delete(ctx, s.key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		w.log.Warn("cannot delete an acknowledged WAL segment", "key", s.key, "err", err)
	}
}
