// Package sandboxtest checks that a component dials through the Net its
// resources carry (tests only).
package sandboxtest
