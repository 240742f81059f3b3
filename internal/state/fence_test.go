package state

import (
	"context"
	"errors"
	"testing"
)

func TestFence(t *testing.T) {
	ctx := context.Background()
	a, err := OpenArtifacts(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	steps := []struct {
		gen    int64
		fenced bool
		stored int64 // after the step
	}{
		{gen: 0, stored: 0},               // no fence: nothing written
		{gen: 1, stored: 1},               // first run takes it
		{gen: 1, stored: 1},               // the same run checks again
		{gen: 3, stored: 3},               // a newer placement takes over
		{gen: 1, fenced: true, stored: 3}, // the old one is refused
		{gen: 2, fenced: true, stored: 3},
		{gen: 0, stored: 3}, // an unfenced run neither reads nor writes
	}
	for i, s := range steps {
		err := a.Fence(ctx, "j", s.gen)
		var fe *FencedError
		if got := errors.As(err, &fe); got != s.fenced || (err != nil && !s.fenced) {
			t.Fatalf("step %d (generation %d): Fence = %v, want fenced %v", i, s.gen, err, s.fenced)
		}
		if s.fenced && (!errors.Is(err, ErrFenced) || fe.Generation != 3) {
			t.Errorf("step %d: error %v does not name generation 3", i, err)
		}
		if got, err := a.ReadFence(ctx, "j"); err != nil || got != s.stored {
			t.Errorf("step %d: stored fence %d (%v), want %d", i, got, err, s.stored)
		}
	}
	// The fence does not look like an artifact.
	if high, err := a.HighestID(ctx, "j"); err != nil || high != 0 {
		t.Errorf("HighestID = %d, %v", high, err)
	}
}

func TestGetArtifact(t *testing.T) {
	ctx := context.Background()
	a, err := OpenArtifacts(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	m := &Manifest{Kind: KindSavepoint, ID: 4, JobID: "j", FormatVersion: 1, MaxParallelism: 8}
	if err := a.Commit(ctx, m); err != nil {
		t.Fatal(err)
	}
	got, err := a.Get(ctx, "j", KindSavepoint, 4)
	if err != nil || got.ID != 4 || got.Kind != KindSavepoint {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	for _, c := range []struct {
		kind string
		id   int64
	}{{KindCheckpoint, 4}, {KindSavepoint, 5}} {
		if _, err := a.Get(ctx, "j", c.kind, c.id); !errors.Is(err, ErrArtifactNotFound) {
			t.Errorf("Get(%s %d) = %v, want ErrArtifactNotFound", c.kind, c.id, err)
		}
	}
}
