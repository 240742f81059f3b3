package daemon

import (
	"fmt"
	"io"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/secretref"
)

// Validate is --validate: the checks start-up runs on the configuration
// file at path, without running anything. It prints every problem to
// stderr, or the warnings to stderr and a one-line summary to stdout, and
// reports whether the configuration is valid.
func Validate(path string, stdout, stderr io.Writer) bool {
	cfg, ok := load(path, stderr)
	if !ok {
		return false
	}
	for _, w := range append(cfg.Warnings(), engine.JobWarnings(cfg, component.Default)...) {
		fmt.Fprintf(stderr, "warning: %s\n", w.Error())
	}
	fmt.Fprintf(stdout, "OK: %s is valid (%s, %s)\n", path, plural(len(cfg.Streams), "stream"), plural(len(cfg.Jobs), "job"))
	return true
}

// load runs the one materialization path and the deep build on a file,
// printing every problem. It is what --validate does.
func load(path string, stderr io.Writer) (*config.Config, bool) {
	data, format, err := config.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: %v\n", err)
		return nil, false
	}
	return materialize(path, data, format, stderr)
}

// materialize is the walk shared by --validate and start-up.
func materialize(name string, data []byte, format config.Format, stderr io.Writer) (*config.Config, bool) {
	reg := component.Default
	cfg, err := config.Materialize(data, format, reg, secretref.Resolver{})
	problems := config.Problems(err)
	if cfg != nil && len(problems) == 0 {
		problems = config.CapProblems(cfg.Redact(append(engine.Check(cfg, reg), checkTLSFiles(cfg.HealthCheck)...)))
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "%s: %s:\n", name, plural(config.TotalProblems(problems), "problem"))
		for _, p := range problems {
			fmt.Fprintf(stderr, "  %s\n", p.Error())
		}
		return nil, false
	}
	return cfg, true
}

// checkTLSFiles loads the certificate files health_check names, as the
// listener and the Agent will at start-up, so that --validate reports
// them.
func checkTLSFiles(hc config.HealthCheck) []config.Problem {
	var ps []config.Problem
	if t := hc.TLS; t != nil && hc.Enabled {
		if _, err := httpapi.ServerTLS(t.CertFile, t.KeyFile, nil); err != nil {
			ps = append(ps, config.Problem{Path: "health_check.tls", Message: err.Error()})
		}
	}
	if hc.HubCAFile != "" && len(hc.HubURLs) > 0 {
		if _, err := httpapi.ClientTLS(hc.HubCAFile); err != nil {
			ps = append(ps, config.Problem{Path: "health_check.hub_ca_file", Message: err.Error()})
		}
	}
	if (hc.HubClientCertFile == "") != (hc.HubClientKeyFile == "") {
		ps = append(ps, config.Problem{Path: "health_check.hub_client_cert_file", Message: "hub_client_cert_file and hub_client_key_file go together"})
	} else if hc.HubClientCertFile != "" && len(hc.HubURLs) > 0 {
		if _, err := httpapi.NewCertReloader(hc.HubClientCertFile, hc.HubClientKeyFile, nil); err != nil {
			ps = append(ps, config.Problem{Path: "health_check.hub_client_cert_file", Message: err.Error()})
		}
	}
	return ps
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
