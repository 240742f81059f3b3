package helm

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// The image's user (tools/release) and the directories the chart mounts.
const (
	imageUser = 65532
	stateDir  = "/var/lib/flowplane"
	tmpDir    = "/tmp"
)

// TestProfilesRender: every profile renders into objects of the kinds the
// chart makes, each decoded strictly, with the workloads the profile asks
// for.
func TestProfilesRender(t *testing.T) {
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			r := render(t, p, nil)
			hub, hasHub := r.component("hub")
			if hasHub != (p.hub != "") {
				t.Errorf("a Hub: %v, want %v", hasHub, p.hub != "")
			}
			node, hasNodes := r.component("node")
			if hasNodes != (p.nodes > 0) {
				t.Errorf("nodes: %v, want %v", hasNodes, p.nodes > 0)
			}
			if hasNodes && int(node.replicas) != p.nodes {
				t.Errorf("%d nodes, want %d", node.replicas, p.nodes)
			}
			if hasHub && hub.kind != map[string]string{"sqlite": "StatefulSet", "postgres": "Deployment"}[p.hub] {
				t.Errorf("the Hub on %s is a %s", p.hub, hub.kind)
			}
			if len(r.serviceAccounts) != 1 || deref(r.serviceAccounts[0].AutomountServiceAccountToken, true) {
				t.Errorf("want one service account without a mounted token, got %+v", r.serviceAccounts)
			}
			if r.notes == "" {
				t.Error("no NOTES.txt")
			}
		})
	}
}

// TestPodsRestricted: every pod runs as the image's non-root user, with
// the RuntimeDefault seccomp profile, no service account token, no
// capability, no privilege escalation and a read-only root filesystem;
// only the state volume and /tmp are writable, and no pod touches the
// host.
func TestPodsRestricted(t *testing.T) {
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			r := render(t, p, nil)
			for _, w := range r.workloads() {
				checkPod(t, w)
			}
		})
	}
}

func checkPod(t *testing.T, w workload) {
	t.Helper()
	ps := w.pod.Spec
	sc := ps.SecurityContext
	if sc == nil || !deref(sc.RunAsNonRoot, false) || deref(sc.RunAsUser, 0) != imageUser || deref(sc.RunAsGroup, 0) != imageUser ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext %+v", w.name, sc)
	}
	if deref(ps.AutomountServiceAccountToken, true) || ps.HostNetwork || ps.HostPID || ps.HostIPC {
		t.Errorf("%s: mounts a service account token or shares the host's namespaces", w.name)
	}
	if len(ps.InitContainers) > 0 || len(ps.EphemeralContainers) > 0 {
		t.Errorf("%s: init or ephemeral containers are not checked here", w.name)
	}
	writable := map[string]bool{}
	for _, v := range ps.Volumes {
		switch {
		case v.HostPath != nil:
			t.Errorf("%s: volume %s is a hostPath", w.name, v.Name)
		case v.EmptyDir != nil:
			writable[v.Name] = true
		}
	}
	for _, c := range w.claims {
		writable[c.Name] = true
	}
	for _, c := range ps.Containers {
		cs := c.SecurityContext
		if cs == nil || !deref(cs.RunAsNonRoot, false) || deref(cs.RunAsUser, 0) != imageUser ||
			deref(cs.AllowPrivilegeEscalation, true) || deref(cs.Privileged, false) || !deref(cs.ReadOnlyRootFilesystem, false) ||
			cs.Capabilities == nil || !slices.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(cs.Capabilities.Add) > 0 ||
			cs.SeccompProfile == nil || cs.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s/%s: container securityContext %+v", w.name, c.Name, cs)
		}
		for _, m := range c.VolumeMounts {
			if m.ReadOnly {
				continue
			}
			if !writable[m.Name] {
				t.Errorf("%s/%s: %s (volume %s) is mounted writable", w.name, c.Name, m.MountPath, m.Name)
			}
			if m.MountPath != stateDir && m.MountPath != tmpDir {
				t.Errorf("%s/%s: writable mount at %s; only %s and %s are", w.name, c.Name, m.MountPath, stateDir, tmpDir)
			}
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
			t.Errorf("%s/%s: resources %+v: want CPU and memory requests and a memory limit", w.name, c.Name, c.Resources)
		}
	}
}

// TestSecretsReferenced: every Secret a pod reads is one the release
// makes, holding the key read, or one the profile says the user makes;
// tokens reach the pods only through secretKeyRef; no value of a Secret
// shows anywhere else (ConfigMaps, pod specs, the notes).
func TestSecretsReferenced(t *testing.T) {
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			r := render(t, p, nil)
			made := r.secretKeys()
			check := func(where, name, key string) {
				if slices.Contains(p.existing, name) {
					return
				}
				keys, ok := made[name]
				switch {
				case !ok:
					t.Errorf("%s reads Secret %q, which neither the release makes nor the profile names as existing", where, name)
				case key != "" && !keys[key]:
					t.Errorf("%s reads key %q of Secret %q, which has %v", where, key, name, keys)
				}
			}
			for _, w := range r.workloads() {
				for _, c := range w.pod.Spec.Containers {
					for _, e := range c.Env {
						if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
							check(w.name+"/"+c.Name+" env "+e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
						}
						if strings.Contains(e.Name, "TOKEN") && e.ValueFrom == nil {
							t.Errorf("%s/%s: %s is a literal value, not a secretKeyRef", w.name, c.Name, e.Name)
						}
					}
					for _, ef := range c.EnvFrom {
						if ef.SecretRef != nil {
							check(w.name+"/"+c.Name+" envFrom", ef.SecretRef.Name, "")
						}
					}
				}
				for _, v := range w.pod.Spec.Volumes {
					if v.Secret != nil {
						check(w.name+" volume "+v.Name, v.Secret.SecretName, "")
					}
				}
			}
			for _, value := range r.secretValues() {
				if len(value) < 8 {
					t.Errorf("a Secret value of %d characters", len(value))
					continue
				}
				for name, text := range r.manifests {
					if strings.Contains(name, "secret.yaml") {
						continue
					}
					if strings.Contains(text, value) {
						t.Errorf("%s shows a Secret's value", name)
					}
				}
				if strings.Contains(r.notes, value) {
					t.Error("NOTES.txt shows a Secret's value")
				}
			}
		})
	}
}

// TestTokensGivenStayInSecrets: tokens given as values go into the Secret
// and nowhere else, base64 as the API stores them.
func TestTokensGivenStayInSecrets(t *testing.T) {
	tokens := map[string]any{
		"operatorToken": "operator-0123456789abcdef0123456789abcdef",
		"nodeToken":     "node-0123456789abcdef0123456789abcdef",
		"nodeAPIToken":  "api-0123456789abcdef0123456789abcdef",
	}
	r := render(t, profiles[slices.IndexFunc(profiles, func(p profile) bool { return p.name == "agents" })], map[string]any{"auth": tokens})
	if len(r.secrets) != 1 {
		t.Fatalf("%d Secrets, want the tokens' one", len(r.secrets))
	}
	got := r.secrets[0].Data
	for field, key := range map[string]string{"operatorToken": "operator-token", "nodeToken": "node-token", "nodeAPIToken": "node-api-token"} {
		if string(got[key]) != tokens[field] {
			t.Errorf("Secret key %s = %q, want auth.%s", key, got[key], field)
		}
		for name, text := range r.manifests {
			if strings.Contains(text, tokens[field].(string)) {
				t.Errorf("%s shows auth.%s in clear", name, field)
			}
		}
		if strings.Contains(r.notes, tokens[field].(string)) {
			t.Errorf("NOTES.txt shows auth.%s", field)
		}
	}
}

// TestHubStorage: on SQLite the Hub is one StatefulSet pod whose database
// is on its volume; highly available, it is a Deployment of two or more
// Hubs reading the PostgreSQL URL from a Secret, with no volume for state,
// a disruption budget and sticky console sessions.
func TestHubStorage(t *testing.T) {
	for _, p := range profiles {
		if p.hub == "" {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			r := render(t, p, nil)
			hub, _ := r.component("hub")
			c := container(t, hub, "hub")
			storage, ok := env(c, "SVC_HUB_STORAGE")
			if !ok {
				t.Fatal("no SVC_HUB_STORAGE")
			}
			for _, name := range []string{"SVC_OPERATOR_TOKEN", "SVC_NODE_TOKEN"} {
				if e, ok := env(c, name); !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					t.Errorf("%s is not read from a Secret: %+v", name, e)
				}
			}
			svc := r.service(t, "fleet-flowplane-hub")
			switch p.hub {
			case "sqlite":
				if hub.replicas != 1 {
					t.Errorf("%d Hubs on SQLite", hub.replicas)
				}
				if storage.Value != stateDir+"/hub.db" {
					t.Errorf("SVC_HUB_STORAGE=%q, want the database on the state volume", storage.Value)
				}
				if len(hub.claims) != 1 || !mountedAt(c, hub.claims[0].Name, stateDir) {
					t.Errorf("the state volume is not a claim mounted at %s: %+v", stateDir, hub.claims)
				}
			case "postgres":
				if hub.replicas < 2 {
					t.Errorf("%d Hubs: want 2 or more", hub.replicas)
				}
				if storage.ValueFrom == nil || storage.ValueFrom.SecretKeyRef == nil || storage.Value != "" {
					t.Errorf("SVC_HUB_STORAGE is not read from a Secret: %+v", storage)
				}
				if len(hub.claims) > 0 || slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == stateDir }) {
					t.Error("a Hub on PostgreSQL has a state volume")
				}
				if e, ok := env(c, "SVC_HUB_ADVERTISE_URL"); !ok || !strings.Contains(e.Value, "$(FLOWPLANE_POD_IP)") {
					t.Errorf("SVC_HUB_ADVERTISE_URL %+v: want each Hub's own address", e)
				}
				if len(r.pdbs) != 1 || r.pdbs[0].Spec.MaxUnavailable == nil {
					t.Errorf("want a PodDisruptionBudget, got %+v", r.pdbs)
				}
				if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
					t.Errorf("Hub Service session affinity %q", svc.Spec.SessionAffinity)
				}
			}
		})
	}
}

// TestNodeIdentityPersists: each node's state directory (its node id
// file, agent/node_credential, WAL) is a volume claim of the StatefulSet,
// kept when the release is deleted or scaled down, and its node id is
// its pod's name.
func TestNodeIdentityPersists(t *testing.T) {
	forNodes(t, func(t *testing.T, p profile, r release, node workload, c corev1.Container) {
		if node.kind != "StatefulSet" {
			t.Fatalf("nodes are a %s", node.kind)
		}
		dir := argAfter(c.Args, "--state-dir")
		if dir != stateDir {
			t.Errorf("--state-dir %q, want %s", dir, stateDir)
		}
		if len(node.claims) != 1 || !mountedAt(c, node.claims[0].Name, dir) {
			t.Errorf("the state directory is not a volume claim: %+v", node.claims)
		}
		ss := r.statefulSets[slices.IndexFunc(r.statefulSets, func(s appsv1.StatefulSet) bool { return s.Name == node.name })]
		if rp := ss.Spec.PersistentVolumeClaimRetentionPolicy; rp == nil || rp.WhenDeleted != "Retain" || rp.WhenScaled != "Retain" {
			t.Errorf("volume claims retention %+v: want Retain", rp)
		}
		hc := nodeConfig(t, r, c)["health_check"].(map[string]any)
		if hc["node_id"] != "${env:FLOWPLANE_NODE_ID}" {
			t.Errorf("node_id %v", hc["node_id"])
		}
		id, _ := env(c, "FLOWPLANE_NODE_ID")
		pod, _ := env(c, "FLOWPLANE_POD_NAME")
		if !strings.HasSuffix(id.Value, "$(FLOWPLANE_POD_NAME)") || pod.ValueFrom == nil || pod.ValueFrom.FieldRef == nil || pod.ValueFrom.FieldRef.FieldPath != "metadata.name" {
			t.Errorf("the node id is not the pod's name: %+v, %+v", id, pod)
		}
	})
}

// TestNodeConfig: the node configuration in the ConfigMap listens where
// the container's port and probes are, protects its API (it listens
// beyond loopback) with a token, joins the Hub the profile names with the
// node token, and references only environment variables the container
// has.
func TestNodeConfig(t *testing.T) {
	ref := regexp.MustCompile(`\$\{(env|secret):([A-Za-z0-9_]+)`)
	forNodes(t, func(t *testing.T, p profile, r release, _ workload, c corev1.Container) {
		cfg := nodeConfig(t, r, c)
		if _, ok := cfg["streams"].([]any); !ok {
			t.Errorf("streams %v: want a list", cfg["streams"])
		}
		hc := cfg["health_check"].(map[string]any)
		_, portText, err := net.SplitHostPort(fmt.Sprint(hc["address"]))
		if err != nil || portText != fmt.Sprint(portOf(c, "http")) {
			t.Errorf("health_check.address %v, container port http %d", hc["address"], portOf(c, "http"))
		}
		if hc["api_token"] != "${env:FLOWPLANE_API_TOKEN}" {
			t.Errorf("api_token %v: the API listens beyond loopback", hc["api_token"])
		}
		urls, _ := hc["hub_urls"].([]any)
		if p.joinHub != (len(urls) > 0) {
			t.Errorf("hub_urls %v, joinHub %v", urls, p.joinHub)
		}
		if p.joinHub {
			if hc["node_token"] != "${env:SVC_NODE_TOKEN}" {
				t.Errorf("node_token %v", hc["node_token"])
			}
			if p.hub != "" {
				svc := r.service(t, "fleet-flowplane-hub")
				want := fmt.Sprintf("http://%s.%s.svc:%d", svc.Name, namespace, svc.Spec.Ports[0].Port)
				if len(urls) != 1 || urls[0] != want {
					t.Errorf("hub_urls %v, want [%s]", urls, want)
				}
			}
		}
		if dp, ok := hc["data_port"]; ok && fmt.Sprint(dp) != fmt.Sprint(portOf(c, "data")) {
			t.Errorf("data_port %v, container port data %d", dp, portOf(c, "data"))
		}
		text, _ := yaml.Marshal(cfg)
		for _, m := range ref.FindAllStringSubmatch(string(text), -1) {
			name := m[2]
			if m[1] == "secret" {
				name = "SVC_SECRET_" + name
			}
			if _, ok := env(c, name); !ok && len(c.EnvFrom) == 0 {
				t.Errorf("the configuration references %s, which the container does not have", m[0])
			}
		}
	})
}

// forNodes runs check on every profile with nodes, with the rendered
// release, the nodes' workload and their container.
func forNodes(t *testing.T, check func(t *testing.T, p profile, r release, node workload, c corev1.Container)) {
	for _, p := range profiles {
		if p.nodes == 0 {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			r := render(t, p, nil)
			node, ok := r.component("node")
			if !ok {
				t.Fatal("no nodes")
			}
			check(t, p, r, node, container(t, node, "node"))
		})
	}
}

// TestNetworkPolicies: the Hub's port admits this release's nodes and the
// profile's peers only; the nodes' API admits only the peers the profile
// names, and their data port only the other nodes.
func TestNetworkPolicies(t *testing.T) {
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			r := render(t, p, nil)
			policies := map[string]int{}
			for i, np := range r.networkPolicies {
				policies[np.Name] = i
				if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
					t.Errorf("%s: policy types %v", np.Name, np.Spec.PolicyTypes)
				}
			}
			if i, ok := policies["fleet-flowplane-hub"]; ok != (p.hub != "") {
				t.Errorf("a Hub policy: %v", ok)
			} else if ok {
				in := r.networkPolicies[i].Spec.Ingress
				if len(in) != 1 || len(in[0].Ports) != 1 || in[0].Ports[0].Port.String() != "http" || len(in[0].From) == 0 {
					t.Errorf("Hub ingress %+v: want its http port from the nodes and the profile's peers", in)
				} else if from := in[0].From[0]; from.PodSelector == nil || from.PodSelector.MatchLabels["app.kubernetes.io/component"] != "node" || from.NamespaceSelector != nil {
					t.Errorf("the Hub's first peer %+v: want this release's nodes", from)
				}
			}
			i, ok := policies["fleet-flowplane-node"]
			if ok != (p.nodes > 0) {
				t.Fatalf("a node policy: %v", ok)
			}
			if !ok {
				return
			}
			values := p.values(t)
			nodeValues, _ := values["node"].(map[string]any)
			npValues, _ := values["networkPolicy"].(map[string]any)
			apiFrom := 0
			if n, ok := npValues["node"].(map[string]any); ok {
				l, _ := n["apiFrom"].([]any)
				apiFrom = len(l)
			}
			for _, rule := range r.networkPolicies[i].Spec.Ingress {
				for _, pt := range rule.Ports {
					switch pt.Port.String() {
					case "http":
						if len(rule.From) != apiFrom || apiFrom == 0 {
							t.Errorf("the node API admits %+v; the profile names %d peers", rule.From, apiFrom)
						}
					case "data":
						if nodeValues["dataPort"] == nil || len(rule.From) != 1 || rule.From[0].PodSelector.MatchLabels["app.kubernetes.io/component"] != "node" {
							t.Errorf("the data port admits %+v", rule.From)
						}
					default:
						t.Errorf("the node policy admits port %s", pt.Port.String())
					}
				}
				if len(rule.Ports) == 0 {
					t.Errorf("a node rule for every port: %+v", rule)
				}
			}
		})
	}
}

// TestServicesSelectPods: every Service selects a workload's pods and
// targets a port its container names.
func TestServicesSelectPods(t *testing.T) {
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			r := render(t, p, nil)
			for _, s := range r.services {
				var match *workload
				for _, w := range r.workloads() {
					if labelsMatch(s.Spec.Selector, w.pod.Labels) {
						match = &w
						break
					}
				}
				if match == nil {
					t.Errorf("Service %s selects no pod", s.Name)
					continue
				}
				for _, sp := range s.Spec.Ports {
					if portOf(match.pod.Spec.Containers[0], sp.TargetPort.String()) == 0 {
						t.Errorf("Service %s targets port %s, which %s does not name", s.Name, sp.TargetPort.String(), match.name)
					}
				}
			}
			for _, ss := range r.statefulSets {
				if _, ok := r.serviceNamed(ss.Spec.ServiceName); !ok {
					t.Errorf("StatefulSet %s names Service %q, which the release does not make", ss.Name, ss.Spec.ServiceName)
				}
			}
		})
	}
}

// TestValuesRefused: values that would render a release that cannot run
// fail the render with what to change.
func TestValuesRefused(t *testing.T) {
	cases := []struct {
		name   string
		values string
		want   string
	}{
		{"sqlite with two Hubs", "hub: {storage: sqlite, replicas: 2}", "hub.storage=sqlite runs one Hub"},
		{"postgres without a Secret", "hub: {storage: postgres, replicas: 2}", "hub.postgres.existingSecret"},
		{"unknown storage", "hub: {storage: mysql}", "at '/hub/storage': value must be one of 'sqlite', 'postgres'"},
		{"a misspelled setting", "hub: {replica: 2}", "at '/hub': additional properties 'replica' not allowed"},
		{"an environment variable not of the Hub", "hub: {env: {PATH: /bin}}", "'PATH' does not match pattern '^SVC_"},
		{"a node id prefix that is not one", "node: {idPrefix: 'a b'}", "at '/node/idPrefix'"},
		{"a token in hub.env", "hub: {env: {SVC_OPERATOR_TOKEN: x}}", "hub.env.SVC_OPERATOR_TOKEN"},
		{"a node secret in hub.env", "hub: {env: {SVC_SECRET_DB: x}}", "hub.env.SVC_SECRET_DB"},
		{"the storage in hub.env", "hub: {env: {SVC_HUB_STORAGE: 'postgres://u:p@db/hub'}}", "hub.env.SVC_HUB_STORAGE"},
		{"Agents without a Hub", "hub: {enabled: false}\nnode: {enabled: true, joinHub: true}", "node.joinHub with hub.enabled=false"},
		{"nothing enabled", "hub: {enabled: false}", "nothing to run"},
		{"a short token", "auth: {nodeToken: short}", "auth.nodeToken must be at least 16 characters"},
		{"one token for both", "auth: {operatorToken: 0123456789abcdef0123, nodeToken: 0123456789abcdef0123}", "must differ"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var values map[string]any
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			_, err := renderValues(values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render: %v, want an error with %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "postgres://u:p@") {
				t.Errorf("the error repeats the URL: %v", err)
			}
		})
	}
}

// nodeConfig is the node configuration the container's --config names,
// read from the release's ConfigMap mounted there.
func nodeConfig(t *testing.T, r release, c corev1.Container) map[string]any {
	t.Helper()
	path := argAfter(c.Args, "--config")
	dir, file := path[:strings.LastIndex(path, "/")], path[strings.LastIndex(path, "/")+1:]
	var volume string
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			volume = m.Name
		}
	}
	node, _ := r.component("node")
	for _, v := range node.pod.Spec.Volumes {
		if v.Name != volume || v.ConfigMap == nil {
			continue
		}
		for _, cm := range r.configMaps {
			if cm.Name != v.ConfigMap.Name {
				continue
			}
			var cfg map[string]any
			if err := yaml.UnmarshalStrict([]byte(cm.Data[file]), &cfg); err != nil {
				t.Fatalf("ConfigMap %s %s: %v", cm.Name, file, err)
			}
			if cfg == nil {
				t.Fatalf("ConfigMap %s has no %s", cm.Name, file)
			}
			return cfg
		}
	}
	t.Fatalf("--config %s is not on a ConfigMap the release makes", path)
	return nil
}

func argAfter(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

func mountedAt(c corev1.Container, volume, path string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == volume && m.MountPath == path && !m.ReadOnly
	})
}

func labelsMatch(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (r release) serviceNamed(name string) (corev1.Service, bool) {
	for _, s := range r.services {
		if s.Name == name {
			return s, true
		}
	}
	return corev1.Service{}, false
}

func (r release) service(t *testing.T, name string) corev1.Service {
	t.Helper()
	s, ok := r.serviceNamed(name)
	if !ok {
		t.Fatalf("no Service %s", name)
	}
	return s
}
