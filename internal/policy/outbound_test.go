package policy

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
)

func TestAddressAllowed(t *testing.T) {
	lan := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("127.0.0.1/32")}
	tests := []struct {
		addr    string
		allow   []netip.Prefix
		listSet bool
		want    bool
	}{
		{"127.0.0.1", nil, false, true},
		{"10.0.0.1", nil, false, true},
		{"169.254.169.254", nil, false, false},
		{"169.254.1.1", nil, false, false},
		{"::ffff:169.254.169.254", nil, false, false},
		{"fe80::1", nil, false, false},
		{"fe80::1%eth0", nil, false, false},
		{"fd00:ec2::254", nil, false, false},
		{"fd00:ec2::253", nil, false, true},
		{"10.1.2.3", lan, true, true},
		{"127.0.0.1", lan, true, true},
		{"10.2.0.1", lan, true, false},
		{"169.254.169.254", []netip.Prefix{netip.MustParsePrefix("169.254.169.254/32")}, true, true},
		{"127.0.0.1", nil, true, false}, // a list of host names only
	}
	for _, tt := range tests {
		got, why := AddressAllowed(netip.MustParseAddr(tt.addr), tt.allow, tt.listSet)
		if got != tt.want || (got == (why != "")) {
			t.Errorf("AddressAllowed(%s, %v, %v) = %v, %q; want %v", tt.addr, tt.allow, tt.listSet, got, why, tt.want)
		}
	}
}

func TestHosts(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"http://169.254.169.254/latest/meta-data", []string{"169.254.169.254"}},
		{"https://user:pw@example.com:8443/x?y=1", []string{"example.com"}},
		{"http://[fe80::1]:80/", []string{"fe80::1"}},
		{"mongodb://a.example:27017,b.example:27018/db", []string{"a.example", "b.example"}},
		{"user:pw@tcp(db.example:3306)/app", []string{"db.example"}},
		{"host=pg.example port=5432 user=u", []string{"pg.example"}},
		{"kafka1:9092", []string{"kafka1"}},
		{"broker.example", []string{"broker.example"}},
		{"file:///tmp/x", nil},
		{"s3://bucket/prefix?endpoint=http://169.254.169.254:9000", []string{"169.254.169.254"}},
		{"s3://bucket", nil},
		{"redis://:pw@127.0.0.1:6379/0", []string{"127.0.0.1"}},
	}
	for _, tt := range tests {
		if got := Hosts(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Hosts(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestDestination: host names resolve (through a replaceable lookup,
// loopback only) before they are decided.
func TestDestination(t *testing.T) {
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "local.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case "rebind.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254")}, nil
		}
		return nil, errors.New("no such host")
	}
	def := Default(t.TempDir()).WithLookup(lookup)
	rp := config.Default().RemotePolicy
	rp.OutboundAllow = []string{"127.0.0.0/8", "*.allowed.test"}
	listed := New(rp, t.TempDir()).WithLookup(lookup)
	tests := []struct {
		p     *Policy
		value string
		ok    bool
	}{
		{def, "http://local.test:8080/x", true},
		{def, "http://rebind.test/x", false},
		{def, "http://169.254.169.254/latest/meta-data/", false},
		{def, "http://metadata.google.internal/computeMetadata/v1/", false},
		{def, "http://METADATA.google.internal./", false},
		{def, "http://unknown.test/", true},
		{listed, "http://127.0.0.1:9/", true},
		{listed, "http://local.test/", true},
		{listed, "http://a.allowed.test/", true},
		{listed, "http://10.0.0.1/", false},
		{listed, "http://unknown.test/", false},
		{listed, "http://rebind.test/", false},
	}
	for _, tt := range tests {
		err := tt.p.Destination(context.Background(), tt.value)
		if (err == nil) != tt.ok {
			t.Errorf("Destination(%q) = %v, want allowed %v", tt.value, err, tt.ok)
		}
	}
}

// FuzzDestination: whatever a delivered value holds, reading its hosts
// and deciding them never panics, and an address literal among them is
// decided as AddressAllowed decides it.
func FuzzDestination(f *testing.F) {
	for _, s := range []string{"http://169.254.169.254/", "u:p@tcp([fe80::1%eth0]:1)/d", "host=a hostaddr=b", "s3://b?endpoint=%zz", "a,b,,[::1]:9", "://", "file://x"} {
		f.Add(s)
	}
	p := Default(f.TempDir()).WithLookup(func(context.Context, string) ([]netip.Addr, error) {
		return nil, errors.New("no lookups here")
	})
	f.Fuzz(func(t *testing.T, value string) {
		err := p.Destination(context.Background(), value)
		for _, h := range Hosts(value) {
			if a, perr := netip.ParseAddr(h); perr == nil {
				if ok, _ := AddressAllowed(a, nil, false); !ok && err == nil {
					t.Errorf("%q names %s, refused alone, but the value is allowed", value, a)
				}
			}
		}
	})
}

// TestDialAllowed: the decision made as a connection is made, with the
// name it was asked for and the address it reaches.
func TestDialAllowed(t *testing.T) {
	def := Default(t.TempDir())
	rp := config.Default().RemotePolicy
	rp.OutboundAllow = []string{"10.1.0.0/16", "*.allowed.test", "db.test"}
	listed := New(rp, t.TempDir())
	rp.OutboundAllow = []string{"db.test", "169.254.169.254/32"}
	metaListed := New(rp, t.TempDir())
	tests := []struct {
		p    *Policy
		host string
		addr string
		ok   bool
	}{
		{def, "rebind.test", "169.254.169.254", false},
		{def, "169.254.169.254", "169.254.169.254", false},
		{def, "rebind.test", "fe80::1%eth0", false},
		{def, "metadata.google.internal", "10.0.0.1", false},
		{def, "rebind.test", "127.0.0.1", true},
		{listed, "db.test", "127.0.0.1", true},         // a listed name reaches what it resolves to
		{listed, "a.allowed.test", "10.200.0.1", true}, // a listed wildcard too
		{listed, "db.test", "169.254.169.254", false},  // but not metadata
		{metaListed, "db.test", "169.254.169.254", true},
		{listed, "other.test", "127.0.0.1", false}, // an unlisted name must reach a listed CIDR
		{listed, "other.test", "10.1.2.3", true},
		{listed, "127.0.0.1", "127.0.0.1", false},
	}
	for _, tt := range tests {
		why := tt.p.dialAllowed(tt.host, netip.MustParseAddr(tt.addr))
		if (why == "") != tt.ok {
			t.Errorf("dialAllowed(%s, %s) = %q, want allowed %v", tt.host, tt.addr, why, tt.ok)
		}
	}
}
