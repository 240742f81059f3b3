package all

import "github.com/flowplane/flowplane/internal/component"

func init() { component.Default.SetArkFlow(arkflowRows) }

// arkflowRows maps every component of ArkFlow's documentation
// (docs/components of arkflow-rs/arkflow) to flowplane's. TestArkFlowRows
// checks that each named flowplane component is registered.
var arkflowRows = []component.ArkFlowRow{
	row(component.KindInput, "file", "file", "flowplane's `file` reads lines of a local file; ArkFlow's runs SQL over files in object stores: use the `sql` input with `input_type: {type: json}` or `object_store` for that"),
	row(component.KindInput, "generate", "generate", "same fields (`context`, `interval`, `count`, `batch_size`)"),
	row(component.KindInput, "http", "http", "same fields; `auth` bearer and basic"),
	row(component.KindInput, "kafka", "kafka", "same fields; offsets committed only after acknowledgement; `codec` as on every input"),
	row(component.KindInput, "memory", "memory", "same fields"),
	row(component.KindInput, "modbus", "", "not available"),
	row(component.KindInput, "mqtt", "mqtt", "MQTT 5 only (`clean_session` maps to clean start and session expiry)"),
	row(component.KindInput, "multiple_inputs", "multiple_inputs", "same shape; a child's `name` is the `input_name` metadata and the join buffer's table name"),
	row(component.KindInput, "nats", "nats", "same `mode` shapes; `jetstream` accepted beside `jet_stream`"),
	row(component.KindInput, "pulsar", "", "not available"),
	row(component.KindInput, "redis", "redis", "same `mode`/`redis_type`; also Redis streams"),
	row(component.KindInput, "sql", "sql", "`postgres`, `mysql`, `sqlite`, and `json` files (local, `file://` or `s3://` with `object_store`); `duckdb` refused (see decisions.md)"),
	row(component.KindInput, "websocket", "websocket", "same fields"),
	row(component.KindBuffer, "memory", "memory", "same fields"),
	row(component.KindBuffer, "session_window", "session_window", "same fields, `join` included; `state` defaults to ephemeral"),
	row(component.KindBuffer, "sliding_window", "sliding_window", "same fields; `state` defaults to ephemeral"),
	row(component.KindBuffer, "tumbling_window", "tumbling_window", "same fields; `state` defaults to ephemeral"),
	row(component.KindProcessor, "batch", "batch", "same fields"),
	row(component.KindProcessor, "json_to_arrow", "json_to_arrow", "same fields; nested values and mixed types become JSON columns"),
	row(component.KindProcessor, "arrow_to_json", "arrow_to_json", "same fields"),
	row(component.KindProcessor, "sql", "sql", "SQLite's dialect, not DataFusion's: `CAST` type names are translated; see the sql processor's page in docs/connectors"),
	row(component.KindProcessor, "protobuf_to_arrow", "protobuf_to_arrow", "same fields; nested messages and repeated fields become JSON columns"),
	row(component.KindProcessor, "arrow_to_protobuf", "arrow_to_protobuf", "same fields"),
	row(component.KindProcessor, "vrl", "", "refused with a reason: VRL is a Rust library; use `mapping` and `filter`"),
	row(component.KindProcessor, "python", "", "refused with a reason: no Python interpreter; use `mapping` and `filter`, or a job's `udf`"),
	row(component.KindOutput, "drop", "drop", "same"),
	row(component.KindOutput, "http", "http", "same fields"),
	row(component.KindOutput, "influxdb", "", "not available"),
	row(component.KindOutput, "kafka", "kafka", "same fields; `exactly_once` makes each batch one transaction"),
	row(component.KindOutput, "mongodb", "mongodb", "same fields"),
	row(component.KindOutput, "mqtt", "mqtt", "MQTT 5 only; `value_field` not supported"),
	row(component.KindOutput, "nats", "nats", "same `mode` shapes"),
	row(component.KindOutput, "pulsar", "", "not available"),
	row(component.KindOutput, "redis", "redis", "same `mode`/`redis_type`; `{type: expr}` keys may be SQL or expr-lang"),
	row(component.KindOutput, "sql", "sql", "`postgres`, `mysql`, `sqlite`; also upsert by key columns"),
	row(component.KindOutput, "stdout", "stdout", "same"),
	row(component.KindTemporary, "redis", "redis", "same fields"),
	row(component.KindCodec, "json", "json", "same"),
	row(component.KindCodec, "protobuf", "protobuf", "same fields; also descriptor-set files"),
	row(component.KindCodec, "schema_registry", "schema_registry", "Confluent wire format, Protobuf and Avro schemas"),
	row(component.KindCodec, "debezium_json", "debezium_json", "same"),
}

func row(k component.Kind, arkflow, flowplane, notes string) component.ArkFlowRow {
	return component.ArkFlowRow{Kind: k, ArkFlow: arkflow, Flowplane: flowplane, Notes: notes}
}
