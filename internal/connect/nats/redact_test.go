package nats

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzRedactURL: a server URL accepted by the configuration is logged
// without its credentials.
func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"nats://u:p@127.0.0.1:4222", "127.0.0.1:4222", "tls://h:1", "ws://a:b@c", "nats://%zz@h", "http://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := redactURL(s)
		if err != nil {
			return
		}
		full := s
		if !strings.Contains(full, "://") {
			full = "nats://" + full
		}
		u, err := url.Parse(full)
		if err != nil {
			t.Fatalf("accepted %q that does not parse", s)
		}
		if p, ok := u.User.Password(); ok && p != "" && strings.Contains(r, p) && !strings.Contains(u.Host, p) && !strings.Contains(u.Scheme, p) {
			t.Errorf("%q redacted to %q, which holds the password", s, r)
		}
		if strings.Contains(r, "@") {
			t.Errorf("%q redacted to %q", s, r)
		}
	})
}
