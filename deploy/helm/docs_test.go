package helm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
)

// docsDir is the repository's documentation.
const docsDir = "../../docs"

// TestLint runs helm lint, as the helm command does, on every profile:
// no warning and no error.
func TestLint(t *testing.T) {
	kube := &chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			res := lint.AllWithKubeVersion(chartDir, p.values(t), namespace, kube)
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Error(m)
				} else {
					t.Log(m)
				}
			}
		})
	}
}

// TestProfilesListed: every values file under ci/ is a profile of the
// tests, and docs/deploy.md shows each.
func TestProfilesListed(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	deploy := section(t, "deploy.md", "## Helm chart")
	for _, f := range files {
		rel, _ := filepath.Rel(chartDir, f)
		if !slices.ContainsFunc(profiles, func(p profile) bool { return p.file == rel }) {
			t.Errorf("%s is not in the tests' profiles", rel)
		}
	}
	for _, p := range profiles {
		if p.file != "" && !strings.Contains(deploy, "deploy/helm/flowplane/"+p.file) {
			t.Errorf("docs/deploy.md, Helm chart, does not show deploy/helm/flowplane/%s", p.file)
		}
	}
}

// TestProbesAsDocumented: the ports, probe paths and state directory of
// every profile's pods are those of docs/deploy.md's table of the chart,
// whose probe paths are those the Hub and the node serve (docs/hub-api.md,
// docs/node-api.md), and the pods run as the image's user with the
// image's state directory (docs/deploy.md, "Container image").
func TestProbesAsDocumented(t *testing.T) {
	deploy := section(t, "deploy.md", "## Helm chart")
	rows := map[string][]string{}
	for line := range strings.SplitSeq(deploy, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if len(cells) < 6 || !strings.HasPrefix(line, "|") {
			continue
		}
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		rows[cells[0]] = cells
	}
	served := map[string]string{
		"Hub":  section(t, "hub-api.md", "### Probes and metrics (open)"),
		"node": section(t, "node-api.md", "## Probes"),
	}
	image := section(t, "deploy.md", "## Container image")
	for _, want := range []string{fmt.Sprintf("`%d:%d`", imageUser, imageUser), "`" + stateDir + "`"} {
		if !strings.Contains(image, want) {
			t.Errorf("docs/deploy.md, Container image, does not say %s", want)
		}
	}
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			r := render(t, p, nil)
			check := func(row, served string, w workload, c corev1.Container) {
				cells, ok := rows[row]
				if !ok {
					t.Fatalf("docs/deploy.md has no row %q in its table of the chart", row)
				}
				port, live, ready := cells[2], cells[3], cells[4]
				if got := fmt.Sprint(portOf(c, "http")); got != port {
					t.Errorf("%s: port %s, docs/deploy.md says %s", row, got, port)
				}
				for _, probe := range []struct {
					name string
					p    *corev1.Probe
					want string
				}{{"liveness", c.LivenessProbe, live}, {"readiness", c.ReadinessProbe, ready}} {
					if probe.p == nil || probe.p.HTTPGet == nil {
						t.Errorf("%s: no HTTP %s probe", row, probe.name)
						continue
					}
					if probe.p.HTTPGet.Path != probe.want || probe.p.HTTPGet.Port.String() != "http" {
						t.Errorf("%s: %s probe %s on port %s, docs/deploy.md says %s on the http port", row, probe.name, probe.p.HTTPGet.Path, probe.p.HTTPGet.Port.String(), probe.want)
					}
					if !strings.Contains(served, "| `"+probe.want+"`") {
						t.Errorf("%s: the %s probe's path %s is not one the API documentation lists", row, probe.name, probe.want)
					}
				}
				state := strings.Trim(strings.Fields(cells[5])[0], "`")
				hasState := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == stateDir })
				if (state == stateDir) != hasState {
					t.Errorf("%s: state directory %q in docs/deploy.md; mounted at %s: %v", row, state, stateDir, hasState)
				}
			}
			if hub, ok := r.component("hub"); ok {
				row := map[string]string{"sqlite": "Hub on SQLite", "postgres": "Hubs on PostgreSQL"}[p.hub]
				c := container(t, hub, "hub")
				check(row, served["Hub"], hub, c)
				if addr, _ := env(c, "SVC_HUB_ADDRESS"); addr.Value != fmt.Sprintf(":%d", portOf(c, "http")) {
					t.Errorf("SVC_HUB_ADDRESS %q, container port %d", addr.Value, portOf(c, "http"))
				}
			}
			if node, ok := r.component("node"); ok {
				check("nodes", served["node"], node, container(t, node, "node"))
			}
		})
	}
}

// section is the text of a docs page from a heading to the next heading
// of the same or a higher level (outside code blocks).
func section(t *testing.T, page, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(docsDir, page))
	if err != nil {
		t.Fatal(err)
	}
	level := strings.Index(heading, " ")
	var out []string
	in, fenced := false, false
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		hashes := len(line) - len(strings.TrimLeft(line, "#"))
		isHeading := !fenced && hashes > 0 && strings.HasPrefix(line[hashes:], " ")
		switch {
		case line == heading && !fenced:
			in = true
			continue
		case in && isHeading && hashes <= level:
			return strings.Join(out, "\n")
		}
		if in {
			out = append(out, line)
		}
	}
	if !in {
		t.Fatalf("docs/%s has no %q", page, heading)
	}
	return strings.Join(out, "\n")
}
