package dataplane

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLoadIdentity: the identity is created once, 0600, and the same key
// and fingerprint come back on the next load; a damaged file is an error
// that says how to recover, never silently a new key.
func TestLoadIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	first, err := LoadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !ValidFingerprint(first.Fingerprint()) {
		t.Fatalf("fingerprint %q", first.Fingerprint())
	}
	fi, err := os.Stat(filepath.Join(dir, IdentityFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s mode %v, want 0600", IdentityFile, fi.Mode().Perm())
	}
	again, err := LoadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.Fingerprint() != first.Fingerprint() {
		t.Fatalf("fingerprint changed across loads: %s, then %s", first.Fingerprint(), again.Fingerprint())
	}
	if err := os.WriteFile(filepath.Join(dir, IdentityFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadIdentity(dir); err == nil {
		t.Fatal("a damaged identity file loaded")
	}
}

func TestValidFingerprint(t *testing.T) {
	good := FingerprintOf([]byte("cert"))
	for s, want := range map[string]bool{
		good:                        true,
		"":                          false,
		good[:len(good)-1]:          false,
		"SHA256" + good[6:]:         false,
		good[:10] + "G" + good[11:]: false,
	} {
		if got := ValidFingerprint(s); got != want {
			t.Errorf("ValidFingerprint(%q) = %v, want %v", s, got, want)
		}
	}
}
