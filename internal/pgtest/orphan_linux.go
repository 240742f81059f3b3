package pgtest

import "syscall"

// endWithParent makes the server die with the test binary: a test that
// panics or is killed skips every cleanup, and the server would run on.
func endWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
