package httpapi

import (
	"crypto/sha256"
	"testing"
)

func TestDigestEqual(t *testing.T) {
	want := sha256.Sum256([]byte("token"))
	cases := map[string]bool{
		"token":  true,
		"Token":  false,
		"toke":   false,
		"tokenn": false,
		"":       false,
		// a digest-length string must not be mistaken for the digest itself
		string(want[:]): false,
	}
	for in, exp := range cases {
		if got := digestEqual(want, in); got != exp {
			t.Errorf("digestEqual(%q) = %v, want %v", in, got, exp)
		}
	}
}
