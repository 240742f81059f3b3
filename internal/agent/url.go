package agent

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/flowplane/flowplane/internal/config"
)

// defaultPrefix is the agent API's prefix on a Hub URL without a path.
const defaultPrefix = "/api/v1"

// hubBase turns a configured Hub URL into the prefix its agent routes hang
// under: a URL without a path (or "/") gets /api/v1; one with a path uses
// it. User information, query and fragment are dropped.
func hubBase(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("hub url %q is not an http:// or https:// URL", redactURL(raw))
	}
	p := strings.TrimRight(u.Path, "/")
	if p == "" {
		p = defaultPrefix
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: p}).String(), nil
}

// plainBeyondLoopback reports whether a Hub URL is http:// to a host other
// than loopback (an IP or localhost), where tokens would cross the
// network in clear.
func plainBeyondLoopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" {
		return false
	}
	return !config.IsLoopback(net.JoinHostPort(u.Hostname(), "0"))
}

// redactURL is a Hub URL fit for logs and GET /system: its password is
// replaced.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}
