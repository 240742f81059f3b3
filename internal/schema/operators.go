package schema

// The operator kinds' config objects. They mirror the typed configs of
// package job (MapConfig, FilterConfig, AggregateConfig, WindowConfig,
// UDFConfig), which decodes them strictly at plan time; job's tests check
// that both agree, field for field. They are written out here because
// package job imports config, which imports schema.

// operatorDef is the definition name of kind's config object.
func operatorDef(kind string) string { return "operator." + kind }

func str(doc string) map[string]any {
	return map[string]any{"type": "string", "minLength": 1, "description": doc}
}

func obj(doc string, props map[string]any, required []any, examples ...any) map[string]any {
	s := map[string]any{"type": "object", "description": doc, "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	if len(examples) > 0 {
		s["examples"] = examples
	}
	return s
}

func ref(def string) map[string]any { return map[string]any{"$ref": "#/$defs/" + def} }

// operatorDefs returns the definitions of the operator configs.
func operatorDefs() map[string]any {
	const exprDoc = "expr-lang expression over the record, as in the mapping processor: the record is this."
	aggregations := map[string]any{
		"type": "array", "maxItems": 256, "items": ref("operator.aggregation"),
		"description": "Named aggregates; each appears in the result under its name.",
	}
	sizeMs := func(doc string) map[string]any {
		return map[string]any{"type": "integer", "minimum": 1, "description": doc}
	}
	only := func(typ string, required []any, absent ...string) map[string]any {
		props := map[string]any{}
		for _, a := range absent {
			props[a] = false
		}
		return map[string]any{
			"if":   map[string]any{"properties": map[string]any{"type": map[string]any{"const": typ}}, "required": []any{"type"}},
			"then": map[string]any{"required": required, "properties": props},
		}
	}
	window := obj("A window assigner.", map[string]any{
		"type":     map[string]any{"type": "string", "enum": []any{"tumbling", "sliding", "session"}, "description": "tumbling (size_ms), sliding (size_ms, slide_ms) or session (gap_ms)."},
		"size_ms":  sizeMs("Window length in ms (tumbling, sliding)."),
		"slide_ms": sizeMs("Distance in ms between the starts of sliding windows; at most size_ms."),
		"gap_ms":   sizeMs("Inactivity in ms that closes a session window."),
	}, []any{"type"})
	window["allOf"] = []any{
		only("tumbling", []any{"size_ms"}, "slide_ms", "gap_ms"),
		only("sliding", []any{"size_ms", "slide_ms"}, "gap_ms"),
		only("session", []any{"gap_ms"}, "size_ms", "slide_ms"),
	}
	aggregation := obj("One named aggregate over the records of a key (and window).", map[string]any{
		"name":       str("Result field; unique, and not key, window_start or window_end."),
		"function":   map[string]any{"type": "string", "enum": []any{"count", "sum", "min", "max", "avg", "first", "last"}, "description": "count counts records; the others aggregate expression."},
		"expression": str("The value aggregated (" + exprDoc + "); not used by count."),
	}, []any{"name", "function"})
	aggregation["allOf"] = []any{
		map[string]any{
			"if":   map[string]any{"properties": map[string]any{"function": map[string]any{"const": "count"}}, "required": []any{"function"}},
			"then": map[string]any{"properties": map[string]any{"expression": false}},
			"else": map[string]any{"required": []any{"expression"}},
		},
	}
	return map[string]any{
		"operator.window_spec": window,
		"operator.aggregation": aggregation,
		operatorDef("map"): obj("map: each record becomes what expression returns.", map[string]any{
			"expression": str("Returns the new record; " + exprDoc),
		}, []any{"expression"}, map[string]any{"expression": `merge(this, {"total": this.price * this.quantity})`}),
		operatorDef("filter"): obj("filter: records for which condition is true pass.", map[string]any{
			"condition": str("Boolean " + exprDoc),
		}, []any{"condition"}, map[string]any{"condition": `this.status == "ok"`}),
		operatorDef("aggregate"): obj("aggregate: a running aggregate per key, emitted as {key, <aggregation names>} on every change.", map[string]any{
			"key":          str("The key records are grouped (and partitioned) by; " + exprDoc),
			"aggregations": aggregations,
		}, []any{"key"}, map[string]any{"key": "this.customer", "aggregations": []any{
			map[string]any{"name": "orders", "function": "count"},
			map[string]any{"name": "spent", "function": "sum", "expression": "this.amount"},
		}}),
		operatorDef("window"): obj("window: one result per key and window, {key, window_start, window_end, <aggregation names>}, when the watermark passes the window's end.", map[string]any{
			"key":          str("The key records are grouped (and partitioned) by; " + exprDoc),
			"window":       ref("operator.window_spec"),
			"aggregations": aggregations,
		}, []any{"key", "window"}, map[string]any{
			"key":          "this.user",
			"window":       map[string]any{"type": "tumbling", "size_ms": 10000},
			"aggregations": []any{map[string]any{"name": "clicks", "function": "count"}},
		}),
		operatorDef("udf"): obj("udf: a WebAssembly module's exported function, run with wazero.", map[string]any{
			"module":   str("Path of the WebAssembly module."),
			"function": str("Name of the function it exports."),
		}, []any{"module", "function"}, map[string]any{"module": "udfs/enrich.wasm", "function": "enrich"}),
	}
}

// operatorBranches selects an operator's config schema by its kind. Source
// and sink operators take no config: their component's settings are in
// sources[] and sinks[].
func operatorBranches() []any {
	var out []any
	branch := func(kind string, config any) {
		out = append(out, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"kind": map[string]any{"const": kind}}, "required": []any{"kind"}},
			"then": map[string]any{"properties": map[string]any{"config": config}},
		})
	}
	for _, k := range []string{"map", "filter", "aggregate", "window", "udf"} {
		branch(k, ref(operatorDef(k)))
	}
	branch("source", false)
	branch("sink", false)
	return out
}

// addOperatorConfigs gives the job Operator definition, when the document
// has one, its per-kind config schemas.
func addOperatorConfigs(defs map[string]any) {
	op, _ := defs["Operator"].(map[string]any)
	props, _ := op["properties"].(map[string]any)
	if props["kind"] == nil || props["config"] == nil {
		return
	}
	for name, d := range operatorDefs() {
		defs[name] = d
	}
	op["allOf"] = operatorBranches()
}
