// Package wire holds the JSON types exchanged by the node, the Hub and the
// Agent: one file per resource, field names exactly as the interface
// specification and API.md give them. It holds data and encoding rules only;
// it must not import any other flowplane package or do I/O.
package wire

// ProtocolVersion is the version of the Agent protocol spoken by this build.
const ProtocolVersion = 1
