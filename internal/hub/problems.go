package hub

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
)

// subject names what a route reads or writes, as far as the problem of a
// refused store call depends on it: kind picks the rows of problemRows,
// id fills a message that names it (%q).
type subject struct {
	kind string
	id   string
}

// The subjects whose store errors have problems of their own; anything
// else gets only the rows every route shares.
var (
	anyResource = subject{}
	aJob        = subject{kind: "job"}
	aRollout    = subject{kind: "rollout"}
	anOperation = subject{kind: "operation"}
	aNode       = subject{kind: "node"}
	anUpgrade   = subject{kind: "upgrade"}
)

const configVersionKind = "configuration_version"

// aConfigVersion is a node's configuration version v.
func aConfigVersion(v string) subject {
	return subject{kind: configVersionKind, id: truncate(v, maxIDLen)}
}

// problemRow is one store sentinel's problem, for one kind of subject or,
// with kind "", for every route.
type problemRow struct {
	sentinel error
	kind     string
	status   int
	code     string
	message  string
}

// problemRows is the one table from store sentinels to problems. The first
// row that matches wins, so a subject's rows come before the shared ones.
var problemRows = []problemRow{
	{store.ErrNotFound, aJob.kind, http.StatusNotFound, CodeJobNotFound, "no job with that id"},
	{store.ErrExists, aJob.kind, http.StatusConflict, httpapi.CodeConflict, "a job with that id already exists; upgrade it or choose another id"},
	{store.ErrNotFound, anUpgrade.kind, http.StatusNotFound, httpapi.CodeNotFound, "the job has no upgrade with that id"},
	{store.ErrNotFound, aRollout.kind, http.StatusNotFound, CodeRolloutNotFound, "no rollout with that id"},
	{store.ErrExists, aRollout.kind, http.StatusConflict, httpapi.CodeConflict, "a rollout with that id already exists"},
	{store.ErrRolloutConflict, aRollout.kind, http.StatusConflict, httpapi.CodeConflict, "the rollout kept changing; try again"},
	{store.ErrNotFound, anOperation.kind, http.StatusNotFound, CodeOperationNotFound, "no operation with that id"},
	{store.ErrNotCancellable, anOperation.kind, http.StatusConflict, CodeOperationNotCancellable, "the operation was already dispatched or finished; its outcome stays visible"},
	{store.ErrNotFound, aNode.kind, http.StatusNotFound, CodeNodeNotFound, "no node with that id is registered"},
	{store.ErrNotFound, configVersionKind, http.StatusNotFound, CodeConfigVersionNotFound, "the Hub keeps no version %q for this node"},
	{store.ErrStorage, "", http.StatusServiceUnavailable, CodeStorageUnavailable, "the Hub's storage is unavailable"},
	{store.ErrClosed, "", http.StatusServiceUnavailable, CodeStorageUnavailable, "the Hub's storage is unavailable"},
	{store.ErrInvalid, "", http.StatusBadRequest, httpapi.CodeInvalidQuery, "a query parameter is out of range"},
}

// problemFor maps an error of the store (or of a restore choice) about s
// to the problem the client gets. An error no row names is returned as it
// is: the router answers it 500 and logs it.
func problemFor(err error, s subject) error {
	if err == nil {
		return nil
	}
	var re *reconcile.RestoreError
	if errors.As(err, &re) {
		return restoreRefused(re)
	}
	for _, row := range problemRows {
		if (row.kind == "" || row.kind == s.kind) && errors.Is(err, row.sentinel) {
			msg := row.message
			if strings.Contains(msg, "%q") {
				msg = fmt.Sprintf(msg, s.id)
			}
			return httpapi.NewError(row.status, row.code, msg).WithCause(err)
		}
	}
	return err
}

// restoreRefused answers a refused restore choice.
func restoreRefused(re *reconcile.RestoreError) error {
	switch re.Code {
	case reconcile.CodeCheckpointNotFound:
		return httpapi.NotFound(CodeCheckpointNotFound, re.Message)
	case reconcile.CodeStateFormatIncompatible:
		e := httpapi.Conflict(CodeStateFormatIncompatible, re.Message)
		e.Details = map[string]any{"field": re.Field, "have": re.Have, "want": re.Want}
		return e
	}
	return httpapi.Conflict(re.Code, re.Message)
}

// storeFailed is problemFor(err, anyResource) of a store call that may
// have failed for the storage.
func (h *Hub) storeFailed(err error) error { return h.storeFailedAbout(err, anyResource) }

// storeFailedAbout notes a storage failure (readiness turns 503 until a
// probe write succeeds) and returns the problem a handler about s answers.
func (h *Hub) storeFailedAbout(err error, s subject) error {
	if errors.Is(err, store.ErrFenced) {
		h.leaderFenced()
	}
	if errors.Is(err, store.ErrStorage) && !h.storageDown.Swap(true) {
		h.log.Error("hub: storage failed; answering 503 until it takes writes again", "err", err)
	}
	return problemFor(err, s)
}
