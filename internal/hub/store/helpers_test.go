package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func openTest(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hub.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func dw(intent, node, res string, now time.Time) DesiredWrite {
	return DesiredWrite{IntentID: intent, Operation: "stream_desired_state", NodeID: node, Kind: KindStream,
		ResourceID: res, State: "running", ConfigVersion: "v1", CorrelationID: "corr-" + intent, Actor: "op",
		Now: now, ExpiresAt: now.Add(time.Hour)}
}

func p(n int64) *int64 { return &n }

func count(t *testing.T, s *Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.rdb.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func keyOf(k string) httpapi.IdempotencyKey { return httpapi.IdempotencyKey{Principal: "op", Key: k} }

func mustMigrations(t *testing.T) []migration {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	return ms
}
