package hub

import (
	"net/http"
	"testing"

	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/pgtest"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestHubOnPostgres: with SVC_HUB_STORAGE a postgres:// URL, a write, its
// Idempotency-Key replay and reuse, If-Match, the operation and the audit
// row answer as on SQLite, and survive a restart of the Hub.
func TestHubOnPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	pg.Exec(t, "CREATE DATABASE hub")
	url := pg.DatabaseURI("hub")
	th := serve(t, url, testToken, true)
	auth := []string{"Authorization", "Bearer " + testToken}
	key := append(auth, "Idempotency-Key", "k-1")
	first := th.do(t, "PUT", streamPath+"/desired-state", `{"state":"running","config_version":"v1"}`, key...)
	if first.status != http.StatusAccepted {
		t.Fatalf("PUT: %d %s", first.status, first.body)
	}
	w := decode[wire.DesiredStateResponse](t, first)
	again := th.do(t, "PUT", streamPath+"/desired-state", `{"state":"running","config_version":"v1"}`, key...)
	if again.status != 202 || again.header.Get("Idempotent-Replayed") != "true" || string(again.body) != string(first.body) {
		t.Errorf("replay: %d %q %s", again.status, again.header.Get("Idempotent-Replayed"), again.body)
	}
	if r := th.do(t, "PUT", streamPath+"/desired-state", `{"state":"stopped","config_version":"v1"}`, key...); r.status != 409 || r.problem(t).Code != "idempotency_key_reused" {
		t.Errorf("reuse: %d %s", r.status, r.body)
	}
	if r := th.do(t, "PUT", streamPath+"/desired-state", `{"state":"stopped","config_version":"v1"}`, append(auth, "If-Match", `"generation-7"`)...); r.status != http.StatusPreconditionFailed || r.problem(t).Code != "generation_conflict" {
		t.Errorf("stale If-Match: %d %s", r.status, r.body)
	}
	au := decode[wire.Page[store.AuditRecord]](t, th.do(t, "GET", "/api/v1/audit?resource_id=s1", "", auth...))
	if len(au.Items) < 1 || au.Items[len(au.Items)-1].Outcome != store.OutcomeAccepted {
		t.Errorf("audit: %+v", au)
	}
	th.stop()

	th2 := serve(t, url, testToken, true)
	op := decode[wire.Operation](t, th2.do(t, "GET", "/api/v1/operations/"+w.OperationID, "", auth...))
	if op.State != "pending" || op.Generation != 1 {
		t.Errorf("operation after restart: %+v", op)
	}
	sys := decode[System](t, th2.do(t, "GET", "/api/v1/system", "", auth...))
	if sys.Restored.Resources != 1 || sys.Restored.PendingOutbox != 1 || sys.Storage != "durable" {
		t.Errorf("system after restart: %+v", sys)
	}
}
