package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test.
const chartDir = "flowplane"

// The release every profile is rendered as.
const (
	releaseName = "fleet"
	namespace   = "flowplane"
)

// profile is a values file of the chart and what rendering it must give.
type profile struct {
	name string
	file string // under chartDir; "" renders values.yaml alone
	// existing are the Secrets the profile names but does not make (the
	// user makes them: auth.existingSecret, hub.postgres.existingSecret).
	existing []string
	hub      string // "", "sqlite" or "postgres"
	nodes    int    // node replicas; 0 none
	joinHub  bool
}

// profiles are every values profile of the chart; TestProfilesListed keeps
// the list complete.
var profiles = []profile{
	{name: "default", hub: "sqlite"},
	{name: "standalone", file: "ci/standalone-values.yaml", nodes: 1},
	{name: "hub-sqlite", file: "ci/hub-sqlite-values.yaml", hub: "sqlite"},
	{name: "hub-ha", file: "ci/hub-ha-values.yaml", hub: "postgres", existing: []string{"flowplane-postgres"}},
	{name: "agents", file: "ci/agents-values.yaml", hub: "sqlite", nodes: 3, joinHub: true},
	{name: "agents-external", file: "ci/agents-external-values.yaml", nodes: 2, joinHub: true, existing: []string{"fleet-tokens"}},
}

// release is one rendering of the chart: its objects by kind, decoded
// into the Kubernetes API types, and its notes.
type release struct {
	secrets         []corev1.Secret
	configMaps      []corev1.ConfigMap
	services        []corev1.Service
	serviceAccounts []corev1.ServiceAccount
	statefulSets    []appsv1.StatefulSet
	deployments     []appsv1.Deployment
	networkPolicies []networkingv1.NetworkPolicy
	pdbs            []policyv1.PodDisruptionBudget
	notes           string
	// manifests are the rendered documents' text, file by file.
	manifests map[string]string
}

// values reads a profile's values file (none for the default).
func (p profile) values(t *testing.T) map[string]any {
	t.Helper()
	if p.file == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, p.file))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// renderValues renders the chart as `helm template` does, with the
// profile's values and then extra (overriding) values.
func renderValues(values map[string]any) (map[string]string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}
	rv, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, rv)
}

// render renders a profile and decodes every manifest strictly.
func render(t *testing.T, p profile, extra map[string]any) release {
	t.Helper()
	values := p.values(t)
	if extra != nil {
		values = chartutil.CoalesceTables(extra, values)
	}
	files, err := renderValues(values)
	if err != nil {
		t.Fatalf("render %s: %v", p.name, err)
	}
	return decodeRelease(t, files)
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// decodeRelease decodes every document of the rendered files into the
// type of its kind, refusing unknown fields, duplicate keys and kinds the
// chart is not meant to make.
func decodeRelease(t *testing.T, files map[string]string) release {
	t.Helper()
	r := release{manifests: map[string]string{}}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		text := files[name]
		if strings.HasSuffix(name, "NOTES.txt") {
			r.notes = text
			continue
		}
		if strings.HasPrefix(filepath.Base(name), "_") {
			continue
		}
		r.manifests[name] = text
		for i, doc := range docSeparator.Split(text, -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			if err := r.add([]byte(doc)); err != nil {
				t.Errorf("%s, document %d: %v\n%s", name, i, err, doc)
			}
		}
	}
	return r
}

// stripComments drops the YAML comment lines of a document.
func stripComments(doc string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// add decodes one document into the type its apiVersion and kind name.
func (r *release) add(doc []byte) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return err
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Secret":
		return decodeInto(js, &r.secrets)
	case "v1 ConfigMap":
		return decodeInto(js, &r.configMaps)
	case "v1 Service":
		return decodeInto(js, &r.services)
	case "v1 ServiceAccount":
		return decodeInto(js, &r.serviceAccounts)
	case "apps/v1 StatefulSet":
		return decodeInto(js, &r.statefulSets)
	case "apps/v1 Deployment":
		return decodeInto(js, &r.deployments)
	case "networking.k8s.io/v1 NetworkPolicy":
		return decodeInto(js, &r.networkPolicies)
	case "policy/v1 PodDisruptionBudget":
		return decodeInto(js, &r.pdbs)
	}
	return fmt.Errorf("apiVersion %q kind %q is not one the chart makes", tm.APIVersion, tm.Kind)
}

// decodeInto decodes one JSON object into a new element of list, failing
// on a field the type does not have.
func decodeInto[T any](js []byte, list *[]T) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var v T
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the object")
	}
	*list = append(*list, v)
	return nil
}

// workload is a pod template with the name of what holds it.
type workload struct {
	kind, name string
	replicas   int32
	pod        corev1.PodTemplateSpec
	claims     []corev1.PersistentVolumeClaim
}

// workloads are the release's StatefulSets and Deployments.
func (r release) workloads() []workload {
	var ws []workload
	for _, s := range r.statefulSets {
		ws = append(ws, workload{kind: "StatefulSet", name: s.Name, replicas: deref(s.Spec.Replicas, 1), pod: s.Spec.Template, claims: s.Spec.VolumeClaimTemplates})
	}
	for _, d := range r.deployments {
		ws = append(ws, workload{kind: "Deployment", name: d.Name, replicas: deref(d.Spec.Replicas, 1), pod: d.Spec.Template})
	}
	return ws
}

// component is the workload of a component ("hub" or "node"), if any.
func (r release) component(name string) (workload, bool) {
	for _, w := range r.workloads() {
		if w.pod.Labels["app.kubernetes.io/component"] == name {
			return w, true
		}
	}
	return workload{}, false
}

// secretKeys are the keys of each Secret the release makes.
func (r release) secretKeys() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, s := range r.secrets {
		keys := map[string]bool{}
		for k := range s.Data {
			keys[k] = true
		}
		for k := range s.StringData {
			keys[k] = true
		}
		out[s.Name] = keys
	}
	return out
}

// secretValues are the values of every Secret the release makes.
func (r release) secretValues() []string {
	var out []string
	for _, s := range r.secrets {
		for _, v := range s.Data {
			out = append(out, string(v))
		}
		for _, v := range s.StringData {
			out = append(out, v)
		}
	}
	return out
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func container(t *testing.T, w workload, name string) corev1.Container {
	t.Helper()
	for _, c := range w.pod.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("%s %s has no container %q", w.kind, w.name, name)
	return corev1.Container{}
}

func env(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// portOf is the number of a container's named port.
func portOf(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}
