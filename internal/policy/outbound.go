package policy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strings"

	"github.com/flowplane/flowplane/internal/sandbox"
)

// denied are the destinations refused without an allow-list: link-local
// addresses (cloud metadata services answer there) and the metadata
// addresses outside them.
var denied = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// deniedNames are the metadata services' host names.
var deniedNames = map[string]bool{
	"metadata.google.internal": true,
	"metadata.goog":            true,
	"metadata":                 true,
}

// AddressAllowed decides one destination address: with an allow-list
// (listSet) only addresses within allow; without, any address but
// link-local and cloud metadata ones. why says what refused it.
func AddressAllowed(a netip.Addr, allow []netip.Prefix, listSet bool) (ok bool, why string) {
	a = a.Unmap().WithZone("") // a zoned address is contained in no prefix
	if !a.IsValid() {
		return false, "an invalid address"
	}
	if listSet {
		for _, p := range allow {
			if p.Contains(a) {
				return true, ""
			}
		}
		return false, a.String() + " is not in the allowed destinations"
	}
	for _, p := range denied {
		if p.Contains(a) {
			return false, a.String() + " is a link-local or cloud metadata address"
		}
	}
	return true, ""
}

func (p *Policy) listSet() bool { return len(p.allowNets) > 0 || len(p.allowHosts) > 0 }

func (p *Policy) hostListed(host string) bool {
	for _, h := range p.allowHosts {
		if h == host || (strings.HasPrefix(h, "*.") && strings.HasSuffix(host, h[1:])) {
			return true
		}
	}
	return false
}

// Host decides one destination host (a name or an address) of
// Hub-delivered work. A name is resolved and every address it has must be
// allowed; a name the allow-list lists is allowed as it is. Without an
// allow-list a name that does not resolve is allowed (there is nothing to
// connect to yet); with one it is refused.
func (p *Policy) Host(ctx context.Context, host string) error {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" {
		return nil
	}
	if z := strings.IndexByte(host, '%'); z >= 0 { // fe80::1%eth0
		host = host[:z]
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if ok, why := AddressAllowed(a, p.allowNets, p.listSet()); !ok {
			return fmt.Errorf("%s", why)
		}
		return nil
	}
	if p.hostListed(host) {
		return nil
	}
	if deniedNames[host] {
		return fmt.Errorf("%s is a cloud metadata service", host)
	}
	addrs, err := p.lookup(ctx, host)
	if err != nil || len(addrs) == 0 {
		if p.listSet() {
			return fmt.Errorf("%s is not in the allowed destinations and does not resolve", host)
		}
		return nil
	}
	for _, a := range addrs {
		if ok, why := AddressAllowed(a, p.allowNets, p.listSet()); !ok {
			return fmt.Errorf("%s resolves to %s", host, why)
		}
	}
	return nil
}

// Destination decides a configured destination value: a URL (s3://
// buckets by their endpoint parameter), a go-sql-driver DSN
// (user@tcp(host:port)/db), a key=value connection string (host=...), a
// comma-separated host list, or host[:port].
func (p *Policy) Destination(ctx context.Context, value string) error {
	for _, h := range Hosts(value) {
		if err := p.Host(ctx, h); err != nil {
			return err
		}
	}
	return nil
}

var (
	dsnAddr = regexp.MustCompile(`@[a-z]+\(([^)]*)\)`)
	kvHost  = regexp.MustCompile(`(?:^|\s)(?:host|hostaddr)=([^\s]+)`)
)

// Hosts extracts the hosts a destination value names (see Destination);
// file:// URLs name none.
func Hosts(value string) []string {
	value = strings.TrimSpace(value)
	if m := dsnAddr.FindStringSubmatch(value); m != nil {
		return splitHosts(m[1])
	}
	if scheme, rest, ok := strings.Cut(value, "://"); ok {
		switch strings.ToLower(scheme) {
		case "file":
			return nil
		case "s3":
			if u, err := url.Parse(value); err == nil {
				if ep := u.Query().Get("endpoint"); ep != "" {
					return Hosts(ep)
				}
			}
			return nil
		}
		authority, _, _ := strings.Cut(rest, "/")
		authority, _, _ = strings.Cut(authority, "?")
		if i := strings.LastIndexByte(authority, '@'); i >= 0 {
			authority = authority[i+1:]
		}
		return splitHosts(authority)
	}
	if ms := kvHost.FindAllStringSubmatch(value, -1); ms != nil {
		var hs []string
		for _, m := range ms {
			hs = append(hs, splitHosts(m[1])...)
		}
		return hs
	}
	return splitHosts(value)
}

// splitHosts reads "h1:p1,h2,[::1]:p3" as its hosts.
func splitHosts(s string) []string {
	var hs []string
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if h, _, err := net.SplitHostPort(part); err == nil {
			part = h
		}
		hs = append(hs, strings.Trim(part, "[]"))
	}
	return hs
}

// Net is the network components of Hub-delivered work connect through:
// each connection's address is decided as the socket connects, so that a
// host name checked when the work arrived cannot be made to point
// elsewhere later (DNS rebinding). Host names are resolved with the
// policy's lookup. The address must pass AddressAllowed, except that a
// host name the allow-list lists reaches what it resolves to, save a
// link-local or cloud metadata address no CIDR of the list holds.
func (p *Policy) Net() sandbox.Net {
	return sandbox.Restrict(p.dialAllowed, sandbox.LookupFunc(p.lookup), RuleOutbound)
}

// dialAllowed decides one connection of Hub-delivered work to a, asked
// for as host.
func (p *Policy) dialAllowed(host string, a netip.Addr) string {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if deniedNames[host] {
		return host + " is a cloud metadata service"
	}
	if _, err := netip.ParseAddr(host); err != nil && p.hostListed(host) {
		if ok, why := AddressAllowed(a, nil, false); !ok && !p.netListed(a) {
			return why
		}
		return ""
	}
	_, why := AddressAllowed(a, p.allowNets, p.listSet())
	return why
}

func (p *Policy) netListed(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, n := range p.allowNets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}
