package config

import "fmt"

// httpInputDefaultAddress is the http input's default address (see
// internal/connect/input): a loopback one.
const httpInputDefaultAddress = "127.0.0.1:8000"

// Warnings are what a valid configuration allows but an operator should
// hear about: a listener beyond loopback without authentication (the API
// with insecure_local, the observability listener, an http input without
// auth). They are not errors: start-up logs each at error level and
// --validate prints them.
func (c *Config) Warnings() []Problem {
	var ws []Problem
	hc := c.HealthCheck
	switch {
	case hc.Enabled && !IsLoopback(hc.Address) && hc.APIToken == "":
		ws = append(ws, at("health_check.address", "%q is beyond loopback and the API has no api_token (insecure_local): anyone who reaches it controls the node", hc.Address))
	case !hc.Enabled && hc.Observability.Enabled && !IsLoopback(hc.Observability.Address):
		ws = append(ws, at("health_check.observability.address", "%q is beyond loopback: the observability listener has no authentication, its metrics and probes are open to anyone who reaches it", hc.Observability.Address))
	}
	for i, s := range c.Streams {
		if s.Input.Type == "http" {
			ws = append(ws, httpInputWarnings(fmt.Sprintf("streams[%d].input", i), s.Input.Fields)...)
		}
	}
	for i, j := range c.Jobs {
		for k, src := range j.Sources {
			if src.InputType == "http" {
				ws = append(ws, httpInputWarnings(fmt.Sprintf("jobs[%d].sources[%d].config", i, k), src.Config)...)
			}
		}
	}
	return ws
}

func httpInputWarnings(path string, fields map[string]any) []Problem {
	addr, _ := fields["address"].(string)
	if addr == "" {
		addr = httpInputDefaultAddress
	}
	if auth, _ := fields["auth"].(map[string]any); auth != nil || IsLoopback(addr) {
		return nil
	}
	return []Problem{at(path+".address", "%q is beyond loopback and the http input has no auth: anyone who reaches it can send data into the stream", addr)}
}
