// Package sandbox is how components reach the node's files and network
// when the work they run came from the Hub: an [FS] that opens every file
// through an [os.Root] of an allowed root, and a [Net] that decides each
// address actually connected to. The zero value of each is the host's own
// file system and network, unrestricted: local work, and components built
// without a sandbox (tests, validation), use it.
//
// The decisions themselves (which roots, which addresses) are the remote
// policy's (package policy); this package only enforces them at the moment
// of use, so that a path whose directory became a symbolic link after the
// policy checked it, or a host name that resolves elsewhere by the time
// it is dialled (DNS rebinding), cannot leave what the policy allowed.
// It is a leaf: it must not import other packages of this module.
package sandbox
