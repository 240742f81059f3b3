// Package component is the registry of stream components (inputs, buffers,
// processors, outputs) and the contracts they implement.
//
// Components register from init() with a Spec (name, kind, JSON Schema of the
// fields beside "type", an example, a summary) and a constructor. The
// registry is a value: Default is what the binary uses, NewRegistry gives
// tests their own. This package knows nothing of configuration files or of
// the runtime that drives components.
package component
