package config

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/flowplane/flowplane/internal/component"
)

func itoa(i int) string { return strconv.Itoa(i) }

func at(path string, format string, args ...any) Problem {
	return Problem{Path: path, Message: fmt.Sprintf(format, args...)}
}

// Validate checks the rules a schema cannot express. It assumes the
// configuration passed the schema check and Canonicalize.
func (c *Config) Validate(reg *component.Registry) []Problem {
	var ps []Problem
	ps = append(ps, c.HealthCheck.validate()...)
	ps = append(ps, c.RemotePolicy.validate()...)
	ps = append(ps, c.Tracing.validate()...)
	ids := map[string]int{}
	for i, s := range c.Streams {
		p := "streams[" + itoa(i) + "]"
		if first, dup := ids[s.ID]; dup {
			ps = append(ps, at(p+".id", "duplicate stream id %q (also streams[%d])", s.ID, first))
		} else {
			ids[s.ID] = i
		}
		names := map[string]int{}
		for k, tc := range s.Temporary {
			name, _ := tc.Fields["name"].(string)
			if first, dup := names[name]; dup {
				ps = append(ps, at(p+".temporary["+itoa(k)+"].name", "duplicate temporary name %q (also temporary[%d])", name, first))
			} else {
				names[name] = k
			}
		}
		if s.Durability != nil {
			ps = append(ps, s.Durability.validate(p+".durability")...)
		}
	}
	jobIDs := map[string]int{}
	for i := range c.Jobs {
		p := "jobs[" + itoa(i) + "]"
		if first, dup := jobIDs[c.Jobs[i].ID]; dup {
			ps = append(ps, at(p+".id", "duplicate job id %q (also jobs[%d])", c.Jobs[i].ID, first))
		} else {
			jobIDs[c.Jobs[i].ID] = i
		}
		ps = append(ps, c.Jobs[i].validate(p, reg)...)
	}
	return ps
}

// IsWindow reports whether a buffer type is a legacy window.
func IsWindow(bufferType string) bool { return strings.HasSuffix(bufferType, "_window") }

func (h *HealthCheck) validate() []Problem {
	var ps []Problem
	if (h.DataPort == 0) != (h.DataHost == "") {
		ps = append(ps, at("health_check.data_port", "data_port and data_host go together: set both for a network data plane, or neither"))
	}
	for i, u := range h.HubURLs {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			ps = append(ps, at("health_check.hub_urls["+itoa(i)+"]", "%q is not an http:// or https:// URL", u))
		}
	}
	for i, o := range h.CORSOrigins {
		if err := ValidOrigin(o); err != nil {
			ps = append(ps, at("health_check.cors_origins["+itoa(i)+"]", "%v", err))
		}
	}
	if len(h.HubURLs) > 0 && h.NodeToken == "" {
		ps = append(ps, at("health_check.node_token", "a node with hub_urls needs node_token to register with the Hub"))
	}
	if h.Enabled {
		if _, _, err := net.SplitHostPort(h.Address); err != nil {
			ps = append(ps, at("health_check.address", "%q is not host:port", h.Address))
		} else if !IsLoopback(h.Address) && h.APIToken == "" && !h.InsecureLocal {
			ps = append(ps, at("health_check.address", "%q is not a loopback address; set api_token to protect the API (or insecure_local: true to run unprotected)", h.Address))
		}
	}
	if h.Observability.Enabled && !h.Enabled {
		if _, _, err := net.SplitHostPort(h.Observability.Address); err != nil {
			ps = append(ps, at("health_check.observability.address", "%q is not host:port", h.Observability.Address))
		}
	}
	return ps
}

// ValidOrigin reports whether origin is a browser origin as an Origin header
// carries it, "scheme://host[:port]" (no path, query or trailing slash): an
// allowed origin of another shape would match no browser.
func ValidOrigin(origin string) error {
	if err := http.NewCrossOriginProtection().AddTrustedOrigin(origin); err != nil {
		return fmt.Errorf("%q is not an origin (scheme://host[:port], without a path)", origin)
	}
	return nil
}

// IsLoopback reports whether a host:port listens on loopback only.
// "localhost" counts; an empty host (all interfaces) does not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (t *Tracing) validate() []Problem {
	const at0 = TracingSection
	if !t.Enabled {
		return nil
	}
	var ps []Problem
	if t.Endpoint == "" {
		ps = append(ps, at(at0+".endpoint", "required when tracing is enabled"))
	} else if u, err := url.Parse(t.Endpoint); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Port() == "" {
		// Not echoed: a malformed URL may still hold a credential.
		ps = append(ps, at(at0+".endpoint", "is not an http:// or https:// URL with a host and a port"))
	} else if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		// Credentials in the URL would be logged by whoever prints it.
		ps = append(ps, at(at0+".endpoint", "takes no credentials, query or fragment"))
	}
	if t.ServiceName == "" {
		ps = append(ps, at(at0+".service_name", "must not be empty when tracing is enabled"))
	}
	return ps
}
