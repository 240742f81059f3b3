package mongodb

import (
	"errors"
	"strings"
	"testing"
)

func TestRedactURI(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"mongodb://127.0.0.1:27017", "mongodb://127.0.0.1:27017"},
		{"mongodb://app:s3cret@db1:27017,db2:27018/admin?replicaSet=rs0", "mongodb://db1:27017,db2:27018"},
		{"mongodb://app@h/?authMechanism=MONGODB-X509", "mongodb://h"},
		{"mongodb+srv://app:s3cret@cluster0.example.net/?retryWrites=true", "mongodb+srv://cluster0.example.net"},
		{"mongodb://[::1]:27017/", "mongodb://[::1]:27017"},
		{"mongodb://%2Ftmp%2Fmongodb-27017.sock", "mongodb://%2Ftmp%2Fmongodb-27017.sock"},
		{"mongodb://h/?tlsCertificateKeyFilePassword=s3cret", "mongodb://h"},
	} {
		got, err := redactURI(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("redactURI(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "127.0.0.1:27017", "http://h", "mongodb://", "mongodb://u:p@", "mongodb://u:p/q@h",
		"mongodb://u:p@x@h", "mongodb://u:p:q@h", "mongodb://h h", "mongodb://u:p?@h", "mongodb://,,"} {
		if got, err := redactURI(in); !errors.Is(err, errBadURI) {
			t.Errorf("redactURI(%q) = %q, %v; want errBadURI", in, got, err)
		}
	}
}

// FuzzRedactURI: what redactURI lets through for logs is the scheme and
// the host list, built only from the bytes after the user info, and never
// holds the password or a secret option.
func FuzzRedactURI(f *testing.F) {
	for _, s := range []string{"mongodb://u:p@127.0.0.1:27017", "mongodb://h", "mongodb+srv://a:b@c/d?e=f",
		"mongodb://u:p%40@h/?tlsCertificateKeyFilePassword=x", "mongodb://u:p/x@h", "mongodb://h/?a=b@c", "mongodb://u:@h,g:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := redactURI(s)
		if err != nil {
			if err.Error() != errBadURI.Error() {
				t.Fatalf("error %v is not errBadURI", err)
			}
			return
		}
		scheme, rest, _ := strings.Cut(s, "://")
		hosts := strings.TrimPrefix(r, scheme+"://")
		if hosts == r {
			t.Fatalf("%q redacted to %q, without its scheme", s, r)
		}
		if strings.ContainsAny(hosts, "@/?=&") {
			t.Errorf("%q redacted to %q", s, r)
		}
		info, after, hasInfo := strings.Cut(rest, "@")
		if !hasInfo {
			after = rest
		}
		if !strings.HasPrefix(after, hosts) {
			t.Errorf("%q redacted to %q, which is not the host list after the user info", s, r)
		}
		// So no byte of the user info (the password) nor of the database
		// and options (secret options) can be in the result.
		if hasInfo && strings.Contains(info, "/") || strings.Contains(hosts, "?") {
			t.Errorf("%q accepted with a user info or hosts the driver would read differently", s)
		}
	})
}

// TestScrub: driver errors lose the password and secret option values,
// and still unwrap to the driver's error.
func TestScrub(t *testing.T) {
	uri := "mongodb://app:p%40ss@h/?authSource=admin&tlsCertificateKeyFilePassword=k3y&authMechanismProperties=AWS_SESSION_TOKEN:t0k"
	s := scrubber{secrets: secrets(uri)}
	base := errors.New("auth failed for p%40ss / p@ss, key k3y, props AWS_SESSION_TOKEN:t0k, source admin")
	err := s.wrap(base)
	for _, secret := range []string{"p%40ss", "p@ss", "k3y", "t0k"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%q survived in %q", secret, err)
		}
	}
	if !strings.Contains(err.Error(), "source admin") {
		t.Errorf("scrubbed too much: %q", err)
	}
	if !errors.Is(err, base) {
		t.Errorf("the scrubbed error does not unwrap to the driver's")
	}
	if s.wrap(nil) != nil {
		t.Errorf("wrap(nil) is not nil")
	}
}
