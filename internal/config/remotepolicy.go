package config

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
)

// refName is what an ${env:} or ${secret:} name may be (package secretref's
// rule).
var refName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// hostName is a DNS name as outbound_allow lists it: labels of letters,
// digits and hyphens, an optional leading "*." for every subdomain.
var hostName = regexp.MustCompile(`^(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$`)

func (p RemotePolicy) validate() []Problem {
	const at0 = RemotePolicySection
	var ps []Problem
	// each checks every entry of a list with ok; why completes "%q ...".
	each := func(field string, list []string, ok func(string) bool, why string) {
		for i, v := range list {
			if !ok(v) {
				ps = append(ps, at(at0+"."+field+"["+itoa(i)+"]", "%q "+why, v))
			}
		}
	}
	const notName, notAbs = "is not a variable name: use letters, digits and _", "is not an absolute path"
	each("env", p.Env, refName.MatchString, notName)
	each("secrets", p.Secrets, refName.MatchString, notName)
	each("files", p.Files, filepath.IsAbs, notAbs)
	each("file_roots", p.FileRoots, filepath.IsAbs, notAbs)
	for i, a := range p.OutboundAllow {
		if _, _, err := ParseOutbound(a); err != nil {
			ps = append(ps, at(at0+".outbound_allow["+itoa(i)+"]", "%v", err))
		}
	}
	return ps
}

// ParseOutbound reads one remote_policy.outbound_allow entry: a CIDR or an
// IP address (a prefix of one address), or a host name ("*.example.com"
// for every subdomain), returned lowercased without a trailing dot.
func ParseOutbound(s string) (prefix netip.Prefix, host string, err error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), "", nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), "", nil
	}
	if strings.Contains(s, "/") || !hostName.MatchString(s) {
		return netip.Prefix{}, "", fmt.Errorf("%q is neither a CIDR, an IP address nor a host name", s)
	}
	return netip.Prefix{}, strings.TrimSuffix(strings.ToLower(s), "."), nil
}
