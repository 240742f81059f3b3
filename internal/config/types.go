package config

// The struct tags drive both decoding (json) and the JSON Schema (package
// schema): `doc` is the description, `default` the documented default,
// `enum` the allowed values separated by "|", `min` an inclusive minimum,
// `required:"true"` a required field, `component` the kind of component
// object a field holds, `maxItems` the most items an array may hold
// (MaxArrayItems when absent; see limits.go).

// Config is one engine configuration.
type Config struct {
	Streams     []Stream    `json:"streams" required:"true" maxItems:"1024" doc:"Streams to run (an empty list is allowed)."`
	Jobs        []Job       `json:"jobs,omitempty" maxItems:"256" doc:"Declarative streaming jobs; a jobs-only configuration is valid."`
	Logging     Logging     `json:"logging" doc:"Logging."`
	HealthCheck HealthCheck `json:"health_check" doc:"Health-check and control-plane server."`
	// RemotePolicy is node-local like HealthCheck: a Hub-delivered
	// configuration must not hold it, and the node keeps the one of its
	// --config file.
	RemotePolicy RemotePolicy `json:"remote_policy" doc:"What work the Hub delivers (configurations, job specs, validations) may do on this node; read from the node's own --config file only. Local configuration files are not restricted."`
	// Tests are read by `flowplane test` (package testsuite), which checks
	// their shape; a node ignores them.
	Tests []map[string]any `json:"tests,omitempty" maxItems:"1024" doc:"Declarative tests of this configuration's streams and jobs, run by flowplane test (docs/testing.md); a node ignores them."`
	// Tracing is node-local as well: the tracer provider lives as long as
	// the process, and where spans go is the node operator's choice.
	Tracing Tracing `json:"tracing" doc:"OpenTelemetry traces of streams and jobs, exported by OTLP; off by default; read from the node's own --config file only."`

	redactor *Redactor // secret values: resolved references and literal credentials
	taint    *Taint    // strings holding resolved values
}

// Logging configures the process logger.
type Logging struct {
	Level    string `json:"level" enum:"debug|info|warn|error|trace" default:"info" doc:"Minimum level logged; trace (ArkFlow's finest level) is accepted as an alias of debug."`
	FilePath string `json:"file_path,omitempty" doc:"Append logs to this file instead of stdout."`
	Format   string `json:"format" enum:"plain|json" default:"plain" doc:"Log line format."`
}

// HealthCheck configures the node's HTTP server and, with hub_urls, its Agent.
type HealthCheck struct {
	Enabled           bool          `json:"enabled" default:"true" doc:"Start the server."`
	Address           string        `json:"address" default:"127.0.0.1:8080" doc:"Listen address."`
	HealthPath        string        `json:"health_path" default:"/health" pattern:"^/" doc:"Overall health path."`
	ReadinessPath     string        `json:"readiness_path" default:"/readiness" pattern:"^/" doc:"Readiness path."`
	LivenessPath      string        `json:"liveness_path" default:"/liveness" pattern:"^/" doc:"Liveness path."`
	APIPrefix         string        `json:"api_prefix" default:"/api/v1" pattern:"^/" doc:"Prefix of the versioned API."`
	APIToken          string        `json:"api_token,omitempty" doc:"Bearer token protecting the versioned API."`
	InsecureLocal     bool          `json:"insecure_local" default:"false" doc:"Allow a non-loopback address without api_token (logged as an error)."`
	CORSOrigins       []string      `json:"cors_origins" maxItems:"64" doc:"Allowed browser origins; empty denies cross-origin calls."`
	TLS               *TLS          `json:"tls,omitempty" doc:"Serve the API over HTTPS with this certificate, reloaded when its files change; absent means plain HTTP."`
	HubURLs           []string      `json:"hub_urls" maxItems:"16" doc:"Hub addresses, tried in order as failover candidates; empty means standalone."`
	HubCAFile         string        `json:"hub_ca_file,omitempty" doc:"PEM file of the CA certificates the Agent verifies https:// Hubs against instead of the system roots."`
	HubClientCertFile string        `json:"hub_client_cert_file,omitempty" doc:"PEM client certificate the Agent presents to the Hub (mutual TLS, SVC_HUB_CLIENT_CA); its URI SAN is spiffe://<domain>/node/<node_id>; reloaded when it changes; goes with hub_client_key_file."`
	HubClientKeyFile  string        `json:"hub_client_key_file,omitempty" doc:"PEM private key of hub_client_cert_file."`
	NodeID            string        `json:"node_id,omitempty" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"Stable identity reported to the Hub."`
	NodeToken         string        `json:"node_token,omitempty" doc:"Shared node registration credential; never included in reports."`
	AgentLeaseTTLMs   int           `json:"agent_lease_ttl_ms" default:"15000" min:"1" doc:"Lease duration in ms advertised to the Hub."`
	AgentSessionTTLMs int           `json:"agent_session_ttl_ms" default:"3600000" min:"1" doc:"Hard lifetime in ms of a Hub-issued session credential."`
	DataPort          int           `json:"data_port,omitempty" min:"1" max:"65535" doc:"Data-plane listen port for cross-node shuffle."`
	DataHost          string        `json:"data_host,omitempty" doc:"Routable host peers use to reach the data plane; goes with data_port."`
	Observability     Observability `json:"observability" doc:"Process-level metrics and probes."`
}

// RemotePolicy restricts work the Hub delivers to this node: the
// references it may resolve, the files its components may touch, where
// they may connect, and which commands the node takes at all. Its zero
// lists are the defaults: nothing beyond ${secret:} references the Hub
// resolved, files only under the state directory, any destination but
// link-local and cloud metadata addresses.
type RemotePolicy struct {
	Env               []string `json:"env" maxItems:"256" doc:"Environment variable names Hub-delivered work may read with ${env:NAME}; empty refuses every ${env:} reference."`
	Files             []string `json:"files" maxItems:"256" doc:"Absolute file paths Hub-delivered work may read with ${file:PATH}; empty refuses every ${file:} reference."`
	Secrets           []string `json:"secrets" maxItems:"256" doc:"Names of node-local secrets (SVC_SECRET_<NAME> on this node, not held by the Hub) Hub-delivered work may resolve with ${secret:NAME}."`
	AllowLocalSecrets bool     `json:"allow_local_secrets" default:"false" doc:"Let Hub-delivered work resolve any node-local ${secret:NAME}, listed in secrets or not."`
	FileRoots         []string `json:"file_roots" maxItems:"64" doc:"Absolute directories beneath which Hub-delivered components may read and write files (file input and output, sqlite paths, udf modules, state roots, file:// stores, schema and proto files, log files); empty means the node's state directory. Paths are resolved through os.Root: .. and symbolic links may not leave the root."`
	OutboundAllow     []string `json:"outbound_allow" maxItems:"256" doc:"Hosts and CIDRs Hub-delivered components may connect to; empty allows any destination except link-local (169.254.0.0/16, fe80::/10) and cloud metadata addresses, which are refused unless listed here."`
	JobControl        bool     `json:"job_control" default:"true" doc:"Run Hub job commands; false stops advertising job_control and refuses them with incompatible_capability."`
	ConfigControl     bool     `json:"config_control" default:"true" doc:"Run Hub configuration commands; false stops advertising config_control and refuses them with incompatible_capability."`
}

// Tracing configures the export of spans (per batch through a stream's
// input, processors and output; per chain and batch of a job) to an
// OpenTelemetry collector.
type Tracing struct {
	Enabled       bool    `json:"enabled" default:"false" doc:"Trace streams and jobs and export the spans."`
	Endpoint      string  `json:"endpoint,omitempty" doc:"Collector URL, http:// (plain) or https:// (TLS) with host and port: http://127.0.0.1:4318 for protocol http (path /v1/traces unless the URL names one), http://127.0.0.1:4317 for grpc. Required when enabled."`
	Protocol      string  `json:"protocol" enum:"http|grpc" default:"http" doc:"OTLP transport: http (protobuf over HTTP) or grpc."`
	SamplingRatio float64 `json:"sampling_ratio" default:"1" min:"0" max:"1" doc:"Fraction of batches traced, 0 to 1; a batch whose incoming traceparent is sampled is traced whatever the ratio."`
	ServiceName   string  `json:"service_name" default:"flowplane" doc:"The service.name of the spans' resource."`
}

// TLS names a PEM certificate chain and its private key.
type TLS struct {
	CertFile string `json:"cert_file" required:"true" doc:"PEM certificate chain, server certificate first."`
	KeyFile  string `json:"key_file" required:"true" doc:"PEM private key of the certificate."`
}

// Observability configures the metrics and probe listener.
type Observability struct {
	Enabled     bool   `json:"enabled" default:"true" doc:"Start the listener (when health_check is disabled)."`
	Address     string `json:"address" default:"127.0.0.1:8081" doc:"Listen address."`
	MetricsPath string `json:"metrics_path" default:"/metrics" pattern:"^/" doc:"Prometheus exposition, format 0.0.4."`
	ReadyPath   string `json:"ready_path" default:"/ready" pattern:"^/" doc:"Success once the configured streams and jobs started."`
	LivePath    string `json:"live_path" default:"/live" pattern:"^/" doc:"Success while the process runs."`
}

// Stream is one input -> buffer -> processors -> output pipeline.
type Stream struct {
	ID          string       `json:"id,omitempty" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"Unique stream identifier; default stream-<index>."`
	Input       Component    `json:"input" required:"true" component:"input" doc:"Input component (source)."`
	Buffer      *Component   `json:"buffer,omitempty" component:"buffer" doc:"Buffer or window between input and processors."`
	Pipeline    Pipeline     `json:"pipeline" required:"true" doc:"Processor pipeline."`
	Output      Component    `json:"output" required:"true" component:"output" doc:"Output component (sink)."`
	ErrorOutput *Component   `json:"error_output,omitempty" component:"output" doc:"Output receiving batches a processor failed on."`
	Durability  *Durability  `json:"durability,omitempty" doc:"Per-stream write-ahead log."`
	State       *StreamState `json:"state,omitempty" doc:"State contract for legacy windows; with a window buffer, absent means {durability: ephemeral} (a warning is logged when the stream starts)."`
	Temporary   []Component  `json:"temporary,omitempty" maxItems:"64" component:"temporary" doc:"Temporary storage tables for joins: named lookup tables (e.g. Redis) processors such as enrich read."`

	stateDefaulted bool // State was absent with a window buffer: Canonicalize set it
}

// StateDefaulted reports whether the stream has a window buffer and did not
// declare state, so that Canonicalize declared {durability: ephemeral} for
// it. Starting such a stream logs a warning: its window's contents are not
// recovered, and the configuration did not say it accepts that.
func (s Stream) StateDefaulted() bool { return s.stateDefaulted }

// Pipeline is the ordered list of processors and its worker count.
type Pipeline struct {
	ThreadNum  int         `json:"thread_num" default:"1" min:"1" max:"256" doc:"Worker goroutines processing batches."`
	Processors []Component `json:"processors" required:"true" maxItems:"256" component:"processor" doc:"Processors applied in order."`
}

// Durability configures a stream's write-ahead log.
type Durability struct {
	Enabled         bool   `json:"enabled" default:"true" doc:"Write every batch to the WAL before processing it."`
	Path            string `json:"path,omitempty" doc:"WAL directory; default <state dir>/wal/<stream id>."`
	Sync            string `json:"sync" enum:"per_entry|group_commit|periodic" default:"group_commit" doc:"When appends are fsynced."`
	SyncIntervalMs  int    `json:"sync_interval_ms" default:"100" min:"1" doc:"fsync period in ms for sync: periodic."`
	MaxSegmentBytes int64  `json:"max_segment_bytes" default:"16777216" min:"4096" doc:"Size at which a WAL segment is rolled."`
	MaxBytes        int64  `json:"max_bytes" default:"1073741824" min:"4096" doc:"Bound on the bytes of WAL entries not yet delivered: the input keeps being acknowledged while the output is down until the WAL holds this much, then it gets back-pressure."`
	// Backend moves the WAL to an object store; absent, it is the local
	// directory above.
	Backend *WALBackend `json:"backend,omitempty" doc:"Where the WAL lives: absent is the local directory (path); type object_store keeps it in an S3-compatible bucket."`
}

// WALBackend is ArkFlow's object-store WAL backend: segments of group-committed
// entries in a bucket, one PUT per group commit, and a cursor object.
type WALBackend struct {
	Type          string            `json:"type" required:"true" enum:"object_store" doc:"object_store: segments in a bucket."`
	NodeID        string            `json:"node_id" required:"true" doc:"Stable id of this node: the WAL's namespace in the bucket. Two nodes with the same id corrupt each other's WAL."`
	StreamID      string            `json:"stream_id" required:"true" doc:"Stable id of the stream, unique within the node."`
	Prefix        string            `json:"prefix" default:"flowplane/wal" doc:"Key prefix; keys are <prefix>/<node_id>/<stream_id>/..."`
	URL           string            `json:"url,omitempty" pattern:"^(file|s3)://" doc:"Bucket URL instead of s3 (flowplane): file:///dir or s3://bucket?region=...&endpoint=...&use_path_style=true."`
	S3            *WALS3            `json:"s3,omitempty" doc:"S3 or S3-compatible bucket."`
	Segment       *WALSegment       `json:"segment,omitempty" doc:"Segment limits (balanced preset when absent); segment_tuning takes precedence."`
	SegmentTuning *WALSegmentTuning `json:"segment_tuning,omitempty" doc:"A segment preset with overrides."`
	Cursor        *WALCursor        `json:"cursor,omitempty" doc:"How often the acknowledgement cursor object is written."`
	ParallelPut   *WALParallelPut   `json:"parallel_put,omitempty" doc:"Concurrent segment PUTs."`
	Compression   *WALCompression   `json:"compression,omitempty" doc:"Segment compression."`
}

// WALS3 is the S3 connection of an object-store WAL, named as ArkFlow names it.
type WALS3 struct {
	Bucket          string `json:"bucket" required:"true" doc:"Bucket name."`
	Region          string `json:"region,omitempty" doc:"Region; default us-east-1."`
	Endpoint        string `json:"endpoint,omitempty" doc:"S3-compatible endpoint URL (MinIO, ...); requests then use path-style addressing."`
	AccessKeyID     string `json:"access_key_id,omitempty" doc:"Access key; absent, the AWS SDK's default credential chain applies."`
	SecretAccessKey string `json:"secret_access_key,omitempty" doc:"Secret key; goes with access_key_id."`
	AllowHTTP       bool   `json:"allow_http,omitempty" doc:"Allow an http:// endpoint."`
}

// WALSegment bounds a segment: one group commit is cut into segments of at
// most MaxEntries entries and MaxBytes bytes.
type WALSegment struct {
	MaxEntries    int    `json:"max_entries,omitempty" min:"1" doc:"Entries per segment; default 1000."`
	MaxBytes      int64  `json:"max_bytes,omitempty" min:"1" doc:"Bytes per segment (an entry larger than this gets a segment of its own); default 1048576."`
	FlushInterval string `json:"flush_interval,omitempty" doc:"Accepted for ArkFlow (its loss window); flowplane PUTs a segment as soon as a PUT worker is free and acknowledges nothing before its PUT, so nothing waits on it."`
}

// WALSegmentTuning is a segment preset with overrides.
type WALSegmentTuning struct {
	Strategy      string `json:"strategy,omitempty" enum:"aggressive|balanced|low_latency" doc:"Preset: aggressive 10000 entries/10 MB, balanced 1000/1 MB, low_latency 100/100 KB."`
	MaxEntries    int    `json:"max_entries,omitempty" min:"1" doc:"Overrides the preset's entries per segment."`
	MaxBytes      int64  `json:"max_bytes,omitempty" min:"1" doc:"Overrides the preset's bytes per segment."`
	FlushInterval string `json:"flush_interval,omitempty" doc:"Accepted for ArkFlow; see segment.flush_interval."`
}

// WALCursor says when the cursor (every entry below it acknowledged) is written.
type WALCursor struct {
	MaxEntries int    `json:"max_entries,omitempty" min:"1" doc:"Write the cursor after this many acknowledgements; default 1000."`
	Interval   string `json:"interval,omitempty" doc:"Write the cursor at least this often while it moves, e.g. 2s; default 1s."`
}

// WALParallelPut is the number of concurrent segment PUTs.
type WALParallelPut struct {
	Workers         int    `json:"workers,omitempty" min:"1" max:"8" doc:"Segment PUTs in flight at once, 1-8; default 1."`
	ShutdownTimeout string `json:"shutdown_timeout,omitempty" doc:"How long closing waits for PUTs in flight, e.g. 30s; default 30s."`
}

// WALCompression compresses segments of 10 KiB and more.
type WALCompression struct {
	Type  string `json:"type" required:"true" enum:"none|zstd|gzip|lz4" doc:"none, zstd or gzip (lz4 is ArkFlow's and is refused)."`
	Level *int   `json:"level,omitempty" doc:"zstd 0-22 (default 3), gzip 1-9 (default 6)."`
}

// StreamState is the state contract of a stream's legacy window buffer.
type StreamState struct {
	Durability string `json:"durability" required:"true" enum:"ephemeral" doc:"Only ephemeral is supported: a window buffer's contents are not recovered."`
}

// Job is a declarative streaming job run by the kernel.
type Job struct {
	ID             string      `json:"id" required:"true" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"Unique across jobs."`
	Version        int         `json:"version" required:"true" min:"1" doc:"State-format compatibility on recovery is evaluated against it."`
	Parallelism    int         `json:"parallelism" default:"1" min:"1" doc:"Default task parallelism."`
	MaxParallelism int         `json:"max_parallelism" default:"128" min:"1" max:"32768" doc:"Upper bound for key-group partitioning."`
	Operators      []Operator  `json:"operators" required:"true" maxItems:"1024" doc:"Operators of the job graph."`
	Edges          []Edge      `json:"edges" maxItems:"4096" doc:"Edges between operators."`
	Sources        []Source    `json:"sources" maxItems:"256" doc:"Inputs feeding source operators."`
	Sinks          []Sink      `json:"sinks" maxItems:"256" doc:"Outputs fed by sink operators."`
	State          *JobState   `json:"state,omitempty" doc:"State backend; required by stateful operators."`
	Checkpoint     *Checkpoint `json:"checkpoint,omitempty" doc:"Barrier checkpoint policy; required by durable state."`
	Recovery       string      `json:"recovery" enum:"latest_checkpoint|latest_savepoint|fail" default:"latest_checkpoint" doc:"What a restart restores from."`
	// RestartStrategy is nil when the job declares none:
	// DefaultRestartStrategy applies.
	RestartStrategy *RestartStrategy `json:"restart_strategy,omitempty" doc:"How often a job restarts after task failures before it fails; default failure_rate."`
}

// Operator is one node of a job graph.
type Operator struct {
	ID          string         `json:"id" required:"true" doc:"Unique within the job."`
	Kind        string         `json:"kind" required:"true" doc:"source, map, filter, aggregate, window, sink or udf (join is reserved)."`
	Parallelism int            `json:"parallelism,omitempty" min:"1" doc:"Overrides the job's parallelism."`
	Config      map[string]any `json:"config,omitempty" doc:"Operator-specific settings (expression, key, window...)."`
}

// Edge connects two operators.
type Edge struct {
	ID          string `json:"id,omitempty" doc:"Edge identifier; default <from>-><to>."`
	From        string `json:"from" required:"true" doc:"Upstream operator id."`
	To          string `json:"to" required:"true" doc:"Downstream operator id."`
	Partitioned bool   `json:"partitioned" default:"false" doc:"Key-group routing instead of same-subtask forwarding."`
}

// Source binds an input component to a source operator.
type Source struct {
	OperatorID string         `json:"operator_id" required:"true" doc:"The source operator fed."`
	InputType  string         `json:"input_type" required:"true" doc:"Input component type."`
	Config     map[string]any `json:"config,omitempty" doc:"The input component's fields."`
	Time       *Time          `json:"time,omitempty" doc:"Event-time declaration."`
}

// Sink binds an output component to a sink operator.
type Sink struct {
	OperatorID string         `json:"operator_id" required:"true" doc:"The sink operator draining into the output."`
	OutputType string         `json:"output_type" required:"true" doc:"Output component type."`
	Config     map[string]any `json:"config,omitempty" doc:"The output component's fields."`
}

// Time is a source's event-time declaration.
type Time struct {
	Mode              string    `json:"mode" required:"true" enum:"event_time|processing_time" doc:"Which clock drives windows."`
	TimestampField    string    `json:"timestamp_field,omitempty" doc:"Field read as event timestamp in event_time mode."`
	Watermark         Watermark `json:"watermark" doc:"Watermark generation."`
	AllowedLatenessMs int       `json:"allowed_lateness_ms" default:"0" min:"0" doc:"How far past the watermark late events are accepted."`
	LateEventPolicy   string    `json:"late_event_policy" enum:"drop|route|update" default:"drop" doc:"What happens to late events."`
	LateEventRoute    string    `json:"late_event_route,omitempty" doc:"Operator receiving late events when the policy is route."`
}

// Watermark is a source's watermark strategy.
type Watermark struct {
	Strategy         string `json:"strategy" enum:"bounded_out_of_orderness|monotonous" default:"bounded_out_of_orderness" doc:"Watermark strategy."`
	OutOfOrdernessMs int    `json:"out_of_orderness_ms" default:"0" min:"0" doc:"Bound of out-of-orderness."`
	IdleTimeoutMs    int    `json:"idle_timeout_ms" default:"0" min:"0" doc:"A source idle this long stops holding back the watermark; 0 disables."`
}

// JobState is a job's state backend.
type JobState struct {
	Backend                string `json:"backend" required:"true" doc:"State backend; embedded_kv is supported."`
	Durability             string `json:"durability" enum:"durable|ephemeral" default:"durable" doc:"durable state requires checkpoint."`
	Root                   string `json:"root,omitempty" doc:"Stable state root directory; default SVC_STATE_ROOT."`
	Namespace              string `json:"namespace,omitempty" doc:"Namespace within the root; default the job id."`
	TTLMs                  int    `json:"ttl_ms,omitempty" min:"0" doc:"State entries older than this expire; 0 keeps them."`
	FormatVersion          int    `json:"format_version" default:"1" min:"1" doc:"State format version recovery artifacts are bound to."`
	MaxPendingTransactions int    `json:"max_pending_transactions" default:"4096" doc:"Positive bound of pending state transactions."`
	MaxBytes               *int64 `json:"max_bytes,omitempty" doc:"Positive live-state budget in bytes."`
}

// RestartStrategy says how a job restarts after a task failure and when it
// gives up and fails, as Flink's restart strategies do: fixed_delay allows
// attempts restarts in all, failure_rate allows max_failures_per_interval
// failures within any failure_rate_interval_ms, none fails at the first
// failure. A restart waits delay_ms, doubling after each failure up to
// max_delay_ms (equal to delay_ms: a fixed delay), back to delay_ms once a
// restarted attempt completed a checkpoint.
type RestartStrategy struct {
	Type                   string `json:"type" enum:"failure_rate|fixed_delay|none" default:"failure_rate" doc:"failure_rate, fixed_delay or none."`
	DelayMs                int    `json:"delay_ms" default:"1000" min:"0" doc:"Pause before a restart."`
	MaxDelayMs             int    `json:"max_delay_ms" default:"30000" min:"0" doc:"The pause doubles after each failure up to this; at least delay_ms."`
	Attempts               int    `json:"attempts" default:"3" min:"0" doc:"fixed_delay: restarts allowed over the run."`
	MaxFailuresPerInterval int    `json:"max_failures_per_interval" default:"10" min:"1" doc:"failure_rate: failures allowed within failure_rate_interval_ms."`
	FailureRateIntervalMs  int    `json:"failure_rate_interval_ms" default:"600000" min:"1" doc:"failure_rate: the window failures are counted over."`
}

// Checkpoint is a job's checkpoint policy.
type Checkpoint struct {
	IntervalMs     int    `json:"interval_ms" default:"60000" min:"1" doc:"Time between barrier checkpoints."`
	Retention      int    `json:"retention" default:"3" min:"1" doc:"Completed checkpoints kept."`
	ObjectStoreURI string `json:"object_store_uri" required:"true" pattern:"^(file|s3)://" doc:"Where artifacts go: file:// or s3:// URI."`
}
