package httpapi

import (
	"context"
	"crypto/sha256"
	"net"
	"net/http"
	"net/http/httptest"
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

// TestCheckHostOwnAddress: a Host naming the address the connection was
// accepted on passes, another non-loopback address does not.
func TestCheckHostOwnAddress(t *testing.T) {
	local := &net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 8080}
	cases := map[string]bool{
		"192.0.2.10:8080": true,
		"192.0.2.10":      true,
		"192.0.2.11:8080": false,
		"node.example":    false,
		"127.0.0.1:8080":  true,
		"":                false,
	}
	for host, want := range cases {
		r := httptest.NewRequest("GET", "/x", nil)
		r.Host = host
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(local)))
		if got := checkHost(r) == nil; got != want {
			t.Errorf("Host %q: passes %v, want %v", host, got, want)
		}
	}
}
