// Package all registers every built-in component into component.Default by
// importing the component packages for their init functions. Binaries and
// tests that need the full set import it for its side effect. Its only
// code is the table mapping ArkFlow's components to flowplane's
// (arkflow.go), rendered at the top of docs/components.md.
package all
