// Package config is the engine configuration: its types and defaults, the
// loaders for YAML, JSON and TOML, and the one materialization path every
// caller uses (start-up, --validate, and the control plane's validate and
// apply): bytes -> value tree -> secret references -> JSON Schema check ->
// typed configuration with defaults -> semantic validation.
//
// Building components and job plans (the "deep build") is the engine's
// business; this package must not construct components or start anything.
package config
