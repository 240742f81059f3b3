package hub

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
)

func TestProblemFor(t *testing.T) {
	other := errors.New("disk on fire")
	cases := []struct {
		name   string
		err    error
		about  subject
		status int
		code   string
		msg    string
	}{
		{"a job's not found", fmt.Errorf("get: %w", store.ErrNotFound), aJob, http.StatusNotFound, CodeJobNotFound, "no job with that id"},
		{"a rollout's not found", store.ErrNotFound, aRollout, http.StatusNotFound, CodeRolloutNotFound, "no rollout with that id"},
		{"a job exists", store.ErrExists, aJob, http.StatusConflict, httpapi.CodeConflict, "a job with that id already exists; upgrade it or choose another id"},
		{"a version named", store.ErrNotFound, aConfigVersion("v3"), http.StatusNotFound, CodeConfigVersionNotFound, `the Hub keeps no version "v3" for this node`},
		{"shared rows whatever the subject", store.ErrStorage, aConfigVersion("v3"), http.StatusServiceUnavailable, CodeStorageUnavailable, "the Hub's storage is unavailable"},
		{"closed", store.ErrClosed, anyResource, http.StatusServiceUnavailable, CodeStorageUnavailable, "the Hub's storage is unavailable"},
		{"out of range", store.ErrInvalid, anyResource, http.StatusBadRequest, httpapi.CodeInvalidQuery, "a query parameter is out of range"},
		{"restore refused", &reconcile.RestoreError{Code: reconcile.CodeCheckpointNotFound, Message: "none"}, anyResource, http.StatusNotFound, CodeCheckpointNotFound, "none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e *httpapi.Error
			if !errors.As(problemFor(c.err, c.about), &e) {
				t.Fatalf("no problem for %v", c.err)
			}
			if e.Status != c.status || e.Code != c.code || e.Message != c.msg {
				t.Fatalf("got %d %s %q, want %d %s %q", e.Status, e.Code, e.Message, c.status, c.code, c.msg)
			}
		})
	}
	// A not found with no subject to name, or an error of no row, is not
	// the client's: it stays a 500.
	for _, err := range []error{store.ErrNotFound, other} {
		if got := problemFor(err, anyResource); got != err {
			t.Errorf("problemFor(%v) = %v, want it unchanged", err, got)
		}
	}
}
