package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/pgtest"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestHubMigrate: `flowplane hub migrate` refuses a SQLite file a Hub
// holds, copies it once stopped into an empty PostgreSQL database, which a
// store then reads as the source was and a Hub process serves as the
// SQLite Hub process did, and never prints the password.
func TestHubMigrate(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.Start(t)
	pg.Exec(t, "CREATE DATABASE hub")
	to := pg.DatabaseURI("hub")
	from := filepath.Join(t.TempDir(), "hub.db")
	st, err := store.Open(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := st.AppendAudit(ctx, store.AuditRecord{OccurredAt: wire.At(at), Actor: "op", Action: "test", Outcome: store.OutcomeAccepted}); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, "hub", "migrate", "--from", from, "--to", to)
	if code != exitFailed || !strings.Contains(errOut, "stop the Hub first") || out != "" {
		t.Fatalf("migrate of a held file: exit %d, %q, %q", code, out, errOut)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// A Hub process on the file accepts a write: its intent, operation,
	// outbox row, audit record and events are what the copy must carry.
	src := startHub(t, from)
	client := newHubClient(t, 1)
	res, body := resKey{"node-m", "orders"}, `{"state":"stopped"}`
	r, err := hubDo(ctx, client, http.MethodPut, res.desiredURL(src.base), body)
	if err != nil || r.status != http.StatusAccepted {
		t.Fatalf("write to the SQLite Hub: %v, status %d: %s", err, r.status, r.body)
	}
	written, err := parseAccepted(r, res, "", body)
	if err != nil {
		t.Fatal(err)
	}
	src.stop(t)
	code, out, errOut = runCLI(t, "hub", "migrate", "--from", from, "--to", to)
	if code != exitOK || !strings.Contains(out, "audit                       2 rows") {
		t.Fatalf("migrate: exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "hub", "migrate", "--from", from, "--to", to)
	if code != exitFailed || !strings.Contains(errOut, "not empty") {
		t.Fatalf("second migrate: exit %d, %q", code, errOut)
	}
	if strings.Contains(out+errOut, pgtest.Password) {
		t.Error("the output shows the password")
	}
	dst, err := store.Open(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	au, err := dst.ListAudit(ctx, store.AuditFilter{}, store.Paging{Page: 1, PageSize: 10})
	if err != nil || au.Total != 2 || au.Items[1].Actor != "op" || !au.Items[1].OccurredAt.Equal(at) {
		t.Fatalf("audit in the copy = %+v, %v", au, err)
	}
	// A Hub process on the copy serves the write as the SQLite Hub did.
	verifyDurable(ctx, t, client, startHub(t, to), []resKey{res}, []ack{written})
	if code, _, _ := runCLI(t, "hub", "migrate", "--from", from); code != exitUsage {
		t.Errorf("migrate without --to: exit %d, want %d", code, exitUsage)
	}
}
