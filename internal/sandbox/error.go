package sandbox

import "errors"

// ErrDenied is matched (errors.Is) by every [*Error]; package policy's
// ErrDenied is the same value, so that a refusal at use is reported as one
// at arrival is (policy_denied).
var ErrDenied = errors.New("denied by the node's remote policy")

// Error is a refusal at use: the operation, the file or address it was
// refused for, why, and the rule (a remote_policy field) that refused it.
type Error struct {
	Op     string // open, mkdir, rename, dial, ...
	Path   string // the file as the component named it, or the address dialled
	Reason string
	Rule   string
}

// Error returns "<op> <path>: <reason> (<rule>)".
func (e *Error) Error() string {
	return e.Op + " " + e.Path + ": " + e.Reason + " (" + e.Rule + ")"
}

// Is makes errors.Is(err, ErrDenied) true.
func (e *Error) Is(target error) bool { return target == ErrDenied }
