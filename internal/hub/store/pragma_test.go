package store

import "testing"

// TestTempStoreInMemory: the savepoint journal must not go through a temp
// file (a pwrite per page per write; see Open).
func TestTempStoreInMemory(t *testing.T) {
	s, _ := openTest(t)
	var mode int
	if err := s.rdb.QueryRow("PRAGMA temp_store").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != 2 {
		t.Errorf("temp_store = %d, want 2 (memory)", mode)
	}
}
