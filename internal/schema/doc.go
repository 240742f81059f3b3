// Package schema builds the authoritative JSON Schema (draft 2020-12) of the
// engine configuration from the configuration's Go types and the component
// registry, and checks value trees against it with errors that name
// configuration paths. The same document is printed by `flowplane schema`
// and enforced by the loader, so the two cannot disagree.
//
// It reads struct tags only; it must not import the config package (which
// imports this one) or construct components.
package schema
