package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// The fence of a job is one small object, <job id>/_fence, holding the
// highest generation that ran the job: {"generation": N}. A job placed by
// a Hub runs with the generation of its placement; a run whose generation
// is below the stored one was replaced and must never commit again.
//
// Object stores offer no compare-and-swap here, so Fence is read, compare,
// write: two runs starting at the same moment may both pass once, but the
// newer one writes its generation back at its next check (the stored one
// is then lower than its own), and the older one fails at its own next
// check. Each run checks before every manifest it commits, so the older
// run commits at most the checkpoint in flight while the two overlapped.
const fenceName = "_fence"

// ErrFenced is wrapped by *FencedError.
var ErrFenced = errors.New("fenced")

// FencedError says a newer generation took the job over.
type FencedError struct {
	JobID      string
	Generation int64 // the stored, newer generation
	Own        int64 // the generation of the refused run
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("fenced: generation %d took over job %s (this run is generation %d)", e.Generation, e.JobID, e.Own)
}

func (e *FencedError) Unwrap() error { return ErrFenced }

type fenceRecord struct {
	Generation int64 `json:"generation"`
}

// ReadFence returns the job's stored fence generation (0 when it has none).
func (a *Artifacts) ReadFence(ctx context.Context, jobID string) (int64, error) {
	data, err := a.bucket.ReadAll(ctx, jobID+"/"+fenceName)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("state: read the fence of job %s in %s: %w", jobID, a.uri, err)
	}
	var f fenceRecord
	if err := json.Unmarshal(data, &f); err != nil {
		return 0, fmt.Errorf("state: the fence of job %s in %s: %w", jobID, a.uri, err)
	}
	return f.Generation, nil
}

// WriteFence stores generation as the job's fence.
func (a *Artifacts) WriteFence(ctx context.Context, jobID string, generation int64) error {
	data, _ := json.Marshal(fenceRecord{Generation: generation})
	err := a.bucket.WriteAll(ctx, jobID+"/"+fenceName, data, &blob.WriterOptions{ContentType: "application/json"})
	if err == nil {
		err = a.private(jobID + "/" + fenceName)
	}
	if err != nil {
		return fmt.Errorf("state: write the fence of job %s in %s: %w", jobID, a.uri, err)
	}
	return nil
}

// Fence checks that no generation newer than generation took the job
// over: it returns a *FencedError when the stored generation is greater,
// and stores generation when the stored one is lower (or absent). A
// generation of 0 is no fence: nothing is read or written.
func (a *Artifacts) Fence(ctx context.Context, jobID string, generation int64) error {
	if generation <= 0 {
		return nil
	}
	stored, err := a.ReadFence(ctx, jobID)
	if err != nil {
		return err
	}
	switch {
	case stored > generation:
		return &FencedError{JobID: jobID, Generation: stored, Own: generation}
	case stored < generation:
		return a.WriteFence(ctx, jobID, generation)
	}
	return nil
}
