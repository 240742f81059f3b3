// Package componenttest checks component specs the way the configuration
// loader will: the example parses, satisfies the spec's schema and builds.
// It is imported only by tests.
package componenttest
