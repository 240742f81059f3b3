// Package telemetry sets up what a process tells operators about itself:
// the slog logger chosen by the logging configuration, and (as the node and
// Hub grow) Prometheus registries, metric names and probes. It must not
// depend on the engine or on any API surface.
package telemetry
