// Package testsuite is `flowplane test`: declarative tests of a
// configuration's streams and jobs, read from `*_test.yaml` files next to
// a configuration or from its own `tests:` section (docs/testing.md), run
// in process with the configuration's inputs, outputs, sources and sinks
// replaced by an in-memory harness, and reported like `go test` (and as
// JUnit XML).
//
// A stream case builds the stream's components as a node does
// (engine.BuildStreamParts) and runs the real stream runtime between a
// finite in-memory input and collecting outputs. A job case builds the
// job's plan and runs the real kernel with one in-memory source per source
// operator, whose watermark moves only when the test says so
// (kernel.Clocked), and one transactional sink per sink operator, whose
// committed output the test checks; a restart stops the kernel and builds
// it again from the same state directory and checkpoints, as recovery
// does.
//
// It must not reach anything outside the process: no component of the
// configuration that reads or writes the outside world is run, and the
// files it writes live under a temporary directory it removes.
package testsuite
