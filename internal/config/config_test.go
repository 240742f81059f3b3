package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	_ "github.com/flowplane/flowplane/internal/connect/all"
	"github.com/flowplane/flowplane/internal/secretref"
)

func materializeFile(t *testing.T, path string, env map[string]string) (*config.Config, []config.Problem) {
	t.Helper()
	data, f, err := config.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res := secretref.Resolver{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	cfg, err := config.Materialize(data, f, component.Default, res)
	return cfg, config.Problems(err)
}

func TestGoodConfigurations(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.good.*")
	files = append(files, "../../examples/quickstart.yaml")
	if len(files) < 5 {
		t.Fatalf("expected good testdata files, found %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, ps := materializeFile(t, f, nil)
			if len(ps) > 0 {
				t.Fatalf("problems: %v", ps)
			}
			if cfg == nil {
				t.Fatal("no configuration")
			}
		})
	}
}

func TestBadConfigurations(t *testing.T) {
	// Each expected problem is a path and a substring of its message. The
	// list is complete: an unexpected extra problem fails the test too.
	type want struct{ path, msg string }
	tests := map[string][]want{
		"typo.bad.yaml": {
			{"streams[1].output.type", `unknown output "stdot"; did you mean "stdout"?`},
			{"streams[1].pipeline.processors[0].type", `unknown processor "jsno"; did you mean "json"?`},
			{"streams[1].pipeline.thread_nm", `unknown field; did you mean "thread_num"?`},
		},
		"remote_policy.bad.yaml": {
			{"remote_policy.env[1]", `"bad-name" is not a variable name`},
			{"remote_policy.file_roots[1]", `"data" is not an absolute path`},
			{"remote_policy.files[0]", `"relative/key.pem" is not an absolute path`},
			{"remote_policy.outbound_allow[3]", `"http://x/" is neither a CIDR, an IP address nor a host name`},
			{"remote_policy.outbound_allow[4]", `"bad host" is neither a CIDR, an IP address nor a host name`},
			{"remote_policy.secrets[0]", `"1BAD" is not a variable name`},
		},
		"hub_url.bad.yaml": {
			{"health_check.hub_url", "field hub_url was removed in 0.6; use the list hub_urls instead"},
		},
		"many.bad.yaml": {
			{"health_check.address", `"0.0.0.0:8080" is not a loopback address; set api_token`},
			{"health_check.cors_origins[1]", `"https://console.example/ui/" is not an origin (scheme://host[:port], without a path)`},
			{"health_check.data_port", "data_port and data_host go together"},
			{"streams[0].pipeline.thread_num", "minimum"},
			{"streams[1].durability.max_bytes", "minimum"},
			{"streams[1].id", `duplicate stream id "a" (also streams[0])`},
		},
		"jobs.bad.yaml": {
			{"jobs[0].edges", "cycle: agg -> j1 -> agg"},
			{"jobs[0].edges[3].to", `no operator "nowhere" in this job`},
			{"jobs[0].operators[1].kind", `operator kind "join" is reserved`},
			{"jobs[0].operators[3].id", `duplicate operator id "agg"`},
			{"jobs[0].operators[3].kind", `unknown operator kind "mapp"; did you mean "map"?`},
			{"jobs[0].restart_strategy.max_delay_ms", "must be at least delay_ms (5000), got 1000"},
			{"jobs[0].sources[0].input_type", `unknown input "generat"; did you mean "generate"?`},
			{"jobs[0].sources[0].time.late_event_route", "late_event_policy route needs late_event_route"},
			{"jobs[0].state.backend", `unsupported state backend "rocksdb"`},
			{"jobs[0].state.durability", "durable state requires checkpoint"},
			{"jobs[0].state.max_bytes", "must be a positive integer, got -1"},
			{"jobs[0].state.max_pending_transactions", "must be a positive integer, got 0"},
		},
		"restart.bad.yaml": {
			{"jobs[0].restart_strategy.delay_ms", "minimum"},
			{"jobs[0].restart_strategy.max_failures_per_interval", "minimum"},
			{"jobs[0].restart_strategy.type", `"exponential" is not one of failure_rate, fixed_delay, none`},
		},
		"missing.bad.yaml": {
			{"logging.level", `"loud" is not one of debug, info, warn, error`},
			{"streams", "required field is missing"},
		},
		"secret.bad.yaml": {
			{"streams[0].input.address", "${env:FLOWPLANE_TEST_UNSET_ADDRESS}"},
			{"streams[0].output.headers.Authorization", "${secret:FLOWPLANE_TEST_UNSET}"},
		},
		"tracing.bad.yaml": {
			{"tracing.endpoint", "takes no credentials, query or fragment"},
			{"tracing.protocol", "not one of"},
			{"tracing.sampling_ratio", "maximum"},
			{"tracing.service_name", "must not be empty"},
		},
		"syntax.bad.yaml": {
			{"", "yaml:"},
		},
		"wal_backend.bad.yaml": {
			{"streams[0].durability.backend.compression.level", "23 is outside zstd's 0-22"},
			{"streams[0].durability.backend.cursor.interval", `"-1s" is not a duration such as 500ms, 2s or 1m`},
			{"streams[0].durability.backend.node_id", "required: a stable id of this node"},
			{"streams[0].durability.backend.parallel_put.shutdown_timeout", `"30 s" is not a duration`},
			{"streams[0].durability.backend.parallel_put.workers", "maximum: got 9, want 8"},
			{"streams[0].durability.backend.s3.bucket", "required"},
			{"streams[0].durability.backend.s3.endpoint", "an http:// endpoint needs allow_http: true"},
			{"streams[0].durability.backend.s3.secret_access_key", "access_key_id and secret_access_key go together"},
			{"streams[0].durability.backend.segment.flush_interval", `"soon" is not a duration`},
			{"streams[0].durability.backend.stream_id", `"x/y" contains a slash`},
			{"streams[0].durability.path", "path is the local WAL's directory"},
			{"streams[0].durability.sync", "per_entry is not possible with backend object_store"},
			{"streams[1].durability.backend.compression.level", "compression none takes no level"},
			{"streams[1].durability.backend.s3", "required (or url)"},
			{"streams[1].durability.backend.segment_tuning.strategy", "not one of"},
			{"streams[2].durability.backend.type", "not one of"},
			{"streams[2].durability.backend.url", "url and s3 name the bucket twice"},
			{"streams[3].durability.backend.s3_bucket", "unknown field"},
			{"streams[3].durability.backend.url", "names no bucket"},
		},
	}
	files, _ := filepath.Glob("testdata/*.bad.*")
	for _, f := range files {
		if _, ok := tests[filepath.Base(f)]; !ok {
			t.Errorf("%s has no expected problems in this table", f)
		}
	}
	for name, wants := range tests {
		t.Run(name, func(t *testing.T) {
			_, ps := materializeFile(t, filepath.Join("testdata", name), nil)
			var got []want
			for _, p := range ps {
				got = append(got, want{p.Path, p.Message})
			}
			if len(got) != len(wants) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(wants), config.Problems(&config.Error{Problems: ps}))
			}
			for i, w := range wants {
				if got[i].path != w.path || !strings.Contains(got[i].msg, w.msg) {
					t.Errorf("problem %d = %s: %s\nwant %s: ...%s...", i, got[i].path, got[i].msg, w.path, w.msg)
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	d := config.Default()
	hc := d.HealthCheck
	checks := []struct {
		name      string
		got, want any
	}{
		{"logging.level", d.Logging.Level, "info"},
		{"logging.format", d.Logging.Format, "plain"},
		{"health_check.enabled", hc.Enabled, true},
		{"health_check.address", hc.Address, "127.0.0.1:8080"},
		{"health_check.health_path", hc.HealthPath, "/health"},
		{"health_check.readiness_path", hc.ReadinessPath, "/readiness"},
		{"health_check.liveness_path", hc.LivenessPath, "/liveness"},
		{"health_check.api_prefix", hc.APIPrefix, "/api/v1"},
		{"health_check.insecure_local", hc.InsecureLocal, false},
		{"health_check.agent_lease_ttl_ms", hc.AgentLeaseTTLMs, 15000},
		{"health_check.agent_session_ttl_ms", hc.AgentSessionTTLMs, 3600000},
		{"observability.enabled", hc.Observability.Enabled, true},
		{"observability.address", hc.Observability.Address, "127.0.0.1:8081"},
		{"observability.metrics_path", hc.Observability.MetricsPath, "/metrics"},
		{"observability.ready_path", hc.Observability.ReadyPath, "/ready"},
		{"observability.live_path", hc.Observability.LivePath, "/live"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestNestedDefaults(t *testing.T) {
	cfg, ps := materializeFile(t, "testdata/jobs_only.good.yaml", nil)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	j := cfg.Jobs[0]
	if j.Parallelism != 1 || j.MaxParallelism != 128 || j.Recovery != "latest_checkpoint" {
		t.Errorf("job defaults: parallelism %d max_parallelism %d recovery %q", j.Parallelism, j.MaxParallelism, j.Recovery)
	}
	if j.Edges[0].ID != "src->parse" {
		t.Errorf("edge id default = %q", j.Edges[0].ID)
	}
	cfg, ps = materializeFile(t, "testdata/full.good.yaml", nil)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	tm := cfg.Jobs[0].Sources[0].Time
	if tm.Watermark.Strategy != "bounded_out_of_orderness" || tm.AllowedLatenessMs != 1000 {
		t.Errorf("time = %+v", tm)
	}
	st := cfg.Jobs[0].State
	if st.MaxPendingTransactions != 4096 || st.Durability != "durable" {
		t.Errorf("state defaults = %+v", st)
	}
	if cfg.HealthCheck.NodeToken != "dev-token" {
		t.Errorf("node_token default from secret reference = %q", cfg.HealthCheck.NodeToken)
	}
	d := cfg.Streams[0].Durability
	if d.Sync != "per_entry" || !d.Enabled || d.SyncIntervalMs != 100 || d.MaxBytes != 1<<30 {
		t.Errorf("durability = %+v", d)
	}
	cfg, _ = materializeFile(t, "testdata/minimal.good.yaml", nil)
	s := cfg.Streams[0]
	if s.ID != "stream-0" || s.Pipeline.ThreadNum != 1 {
		t.Errorf("stream defaults: id %q thread_num %d", s.ID, s.Pipeline.ThreadNum)
	}
	// Watermark defaults apply even when the watermark object is absent.
	doc := []byte("streams: []\njobs: [{id: j, version: 1, operators: [{id: s, kind: source}], sources: [{operator_id: s, input_type: memory, config: {messages: []}, time: {mode: processing_time}}]}]")
	cfg, err := config.Materialize(doc, config.YAML, component.Default, secretref.Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Jobs[0].Sources[0].Time; got.Watermark.Strategy != "bounded_out_of_orderness" || got.LateEventPolicy != "drop" {
		t.Errorf("time defaults = %+v", got)
	}
}

func TestFormatsAgree(t *testing.T) {
	var cfgs []*config.Config
	for _, f := range []string{"testdata/minimal.good.json", "testdata/minimal.good.toml"} {
		cfg, ps := materializeFile(t, f, nil)
		if len(ps) > 0 {
			t.Fatalf("%s: %v", f, ps)
		}
		cfgs = append(cfgs, cfg)
	}
	if cfgs[0].Streams[0].Pipeline.ThreadNum != 2 || cfgs[1].Logging.Level != "warn" {
		t.Error("json/toml values not decoded")
	}
	if diff := cmp.Diff([]any{"x"}, cfgs[1].Streams[0].Input.Fields["messages"]); diff != "" {
		t.Errorf("toml component fields (-want +got):\n%s", diff)
	}
}

func TestUnknownExtension(t *testing.T) {
	p := filepath.Join(t.TempDir(), "conf.ini")
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := config.ReadFile(p)
	if err == nil || !strings.Contains(err.Error(), `"conf.ini" has extension ".ini"; use .yaml, .yml, .json or .toml`) {
		t.Fatalf("err = %v", err)
	}
}

// TestSecretsNeverInProblems resolves secrets into fields that then fail the
// schema and semantic checks, whose messages would otherwise quote them.
func TestSecretsNeverInProblems(t *testing.T) {
	const secret = "s3cr3t-VALUE-42"
	env := map[string]string{"LEVEL": secret, "ADDR": secret + ":80", "SVC_SECRET_TOK": secret}
	doc := []byte(`
logging: {level: "${env:LEVEL}"}
health_check: {address: "${env:ADDR}", hub_urls: ["${secret:TOK}"]}
streams: []
`)
	res := secretref.Resolver{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	_, err := config.Materialize(doc, config.YAML, component.Default, res)
	ps := config.Problems(err)
	if len(ps) < 2 {
		t.Fatalf("expected problems, got %v", ps)
	}
	for _, p := range ps {
		if strings.Contains(p.Error(), secret) {
			t.Errorf("problem leaks the secret: %s", p.Error())
		}
	}
}

func FuzzMaterialize(f *testing.F) {
	for _, name := range []string{"minimal.good.yaml", "full.good.yaml", "jobs.bad.yaml", "typo.bad.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	res := secretref.Resolver{LookupEnv: func(string) (string, bool) { return "", false }, ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist }}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Materialize(data, config.YAML, component.Default, res)
		if err == nil && cfg == nil {
			t.Fatal("no error and no configuration")
		}
		for _, p := range config.Problems(err) {
			if p.Message == "" {
				t.Fatalf("problem without a message at %q", p.Path)
			}
		}
	})
}

// TestSyntaxErrorsNameTheirFormatOnce: a document that does not parse is
// one problem, prefixed once with its format, with its line, on one line.
func TestSyntaxErrorsNameTheirFormatOnce(t *testing.T) {
	tests := []struct {
		format config.Format
		doc    string
		want   string
	}{
		{config.YAML, "streams: [ {\n", "yaml: line 1: did not find expected node content"},
		{config.YAML, "streams:\n  - a: 1\n b: 2\n", "yaml: line 2: did not find expected key"},
		{config.YAML, "streams: []\nstreams: []\n", `yaml: line 2: mapping key "streams" already defined at line 1`},
		{config.TOML, "[a\nb=", "toml: line 1, column 3: expected ']' to close table name"},
		{config.JSON, `{"streams": [`, "json: unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(string(tt.format), func(t *testing.T) {
			_, err := config.Materialize([]byte(tt.doc), tt.format, component.Default, secretref.Resolver{})
			ps := config.Problems(err)
			if len(ps) != 1 || ps[0].Error() != tt.want {
				t.Errorf("problems %q, want one: %q", ps, tt.want)
			}
		})
	}
}

func TestDefaultRestartStrategy(t *testing.T) {
	want := config.RestartStrategy{Type: "failure_rate", DelayMs: 1000, MaxDelayMs: 30000, Attempts: 3,
		MaxFailuresPerInterval: 10, FailureRateIntervalMs: 600000}
	if diff := cmp.Diff(&want, config.DefaultRestartStrategy()); diff != "" {
		t.Errorf("default (-want +got):\n%s", diff)
	}
}
