package wal

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestPerEntrySyncsEachEntry checks the per_entry contract: an entry is
// written and fsynced on its own before Append returns.
func TestPerEntrySyncsEachEntry(t *testing.T) {
	dir := t.TempDir()
	w, _ := openT(t, dir, Options{Sync: SyncPerEntry})
	before := w.Stats().Fsyncs
	for i := range uint64(10) {
		seq, err := w.Append(context.Background(), payloadFor(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Stats().Fsyncs - before; got != i+1 {
			t.Fatalf("after %d appends: %d fsyncs, want %d", i+1, got, i+1)
		}
		if !hasEntry(t, dir, seq) {
			t.Fatalf("entry %d reported durable but not in a segment file", seq)
		}
	}
	// Entries queued together are still fsynced one by one.
	release := make(chan struct{})
	started := make(chan struct{})
	var once sync.Once
	w.hookCommit = func() { once.Do(func() { close(started); <-release }) }
	_, first := w.AppendAsync([]byte("a"))
	<-started
	before = w.Stats().Fsyncs
	var chans []<-chan error
	for range 5 {
		_, ch := w.AppendAsync([]byte("b"))
		chans = append(chans, ch)
	}
	close(release)
	for _, ch := range append(chans, first) {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if got := w.Stats().Fsyncs - before; got != 6 {
		t.Errorf("6 queued per_entry appends: %d fsyncs, want 6", got)
	}
}

// TestGroupCommitSharesFsyncs holds the committer in its first round while
// 99 more entries are appended: they must share a single fsync.
func TestGroupCommitSharesFsyncs(t *testing.T) {
	dir := t.TempDir()
	w, _ := openT(t, dir, Options{Sync: SyncGroupCommit})
	release := make(chan struct{})
	started := make(chan struct{})
	var once sync.Once
	w.hookCommit = func() { once.Do(func() { close(started); <-release }) }
	before := w.Stats().Fsyncs
	seq, first := w.AppendAsync(payloadFor(1))
	<-started
	chans := []<-chan error{first}
	seqs := []uint64{seq}
	for i := range uint64(99) {
		seq, ch := w.AppendAsync(payloadFor(i + 2))
		chans = append(chans, ch)
		seqs = append(seqs, seq)
	}
	select {
	case err := <-first:
		t.Fatalf("entry reported durable (%v) while the committer was held", err)
	default:
	}
	close(release)
	for i, ch := range chans {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
		if !hasEntry(t, dir, seqs[i]) {
			t.Fatalf("entry %d reported durable but not in a segment file", seqs[i])
		}
	}
	if got := w.Stats().Fsyncs - before; got != 2 {
		t.Errorf("100 appends in two rounds: %d fsyncs, want 2", got)
	}
}

// TestPeriodicSyncsOnInterval checks the periodic contract in a bubble with
// a fake clock: durable means written; the fsync follows at the interval,
// and only when something was written.
func TestPeriodicSyncsOnInterval(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		w, _ := openT(t, dir, Options{Sync: SyncPeriodic, SyncInterval: time.Second})
		base := w.Stats().Fsyncs
		for i := range uint64(3) {
			seq, err := w.Append(context.Background(), payloadFor(i+1))
			if err != nil {
				t.Fatal(err)
			}
			if !hasEntry(t, dir, seq) {
				t.Fatalf("entry %d reported durable but not written", seq)
			}
		}
		synctest.Wait()
		if got := w.Stats().Fsyncs; got != base {
			t.Errorf("fsyncs before the interval = %d, want %d", got, base)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := w.Stats().Fsyncs; got != base+1 {
			t.Errorf("fsyncs after one interval = %d, want %d", got, base+1)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := w.Stats().Fsyncs; got != base+1 {
			t.Errorf("fsyncs after idle intervals = %d, want %d (nothing to sync)", got, base+1)
		}
		mustClose(t, w)
	})
}

// TestAcksReachDiskOnInterval checks that an ack is written within one sync
// interval even when no append follows it.
func TestAcksReachDiskOnInterval(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			synctest.Test(t, func(t *testing.T) {
				w, _ := openT(t, dir, Options{Sync: mode, SyncInterval: 100 * time.Millisecond})
				appendSeqs(t, w, 1, 3)
				synctest.Wait() // the committer is idle: nothing else will carry the ack
				mustAck(t, w, 2)
				synctest.Wait()
				if ackOnDisk(t, dir, 2) {
					t.Fatal("ack written before the interval; the test cannot tell the tick did it")
				}
				time.Sleep(100 * time.Millisecond)
				synctest.Wait()
				if !ackOnDisk(t, dir, 2) {
					t.Error("ack of 2 not on disk one interval later")
				}
				mustClose(t, w)
			})
		})
	}
}

func ackOnDisk(t *testing.T, dir string, seq uint64) bool {
	t.Helper()
	found := false
	for _, first := range segFiles(t, dir) {
		for _, r := range fileRecords(t, segPath(dir, first)) {
			if r.kind != kindAck {
				continue
			}
			if err := decodeAckPayload(r.payload, func(s uint64) { found = found || s == seq }); err != nil {
				t.Fatal(err)
			}
		}
	}
	return found
}
