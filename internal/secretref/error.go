package secretref

import (
	"errors"
	"io/fs"
)

// Sentinel errors, for errors.Is on an [*Error] or on the joined error of
// [Resolver.Resolve].
var (
	// ErrUnset: a referenced variable is unset and has no default.
	ErrUnset = errors.New("not set")
	// ErrEmptyName: a reference of a known scheme names nothing ("${env:}").
	ErrEmptyName = errors.New("empty name")
	// ErrBadName: an env or secret name is not [A-Za-z_][A-Za-z0-9_]*.
	ErrBadName = errors.New("invalid name")
	// ErrNested: a reference holds "${"; references do not nest.
	ErrNested = errors.New("nested reference")
	// ErrFile: a referenced file cannot be read or is too large.
	ErrFile = errors.New("cannot read file")
)

// Error is one reference that failed to resolve.
type Error struct {
	// Path locates the string in the tree, e.g. "streams[0].output.token";
	// empty for a string at the root.
	Path string
	// Ref is the reference as written, e.g. "${env:TOKEN}". It holds no
	// resolved value.
	Ref string
	// Err is the reason; it wraps one of the sentinel errors.
	Err error
}

// Error returns "<path>: <ref>: <reason>", or "<ref>: <reason>" at the root.
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Ref + ": " + e.Err.Error()
	}
	return e.Path + ": " + e.Ref + ": " + e.Err.Error()
}

// Unwrap returns the reason.
func (e *Error) Unwrap() error { return e.Err }

// reason is a failure message of our own wording that matches a sentinel.
type reason struct {
	msg      string
	sentinel error
}

func (r *reason) Error() string { return r.msg }
func (r *reason) Unwrap() error { return r.sentinel }

// fileError reports a read failure without echoing anything the reader
// returned beyond the cause: the path is already in the reference, and a
// custom reader's error must not smuggle content into the message.
type fileError struct {
	cause error
}

func (f *fileError) Error() string {
	msg := f.cause.Error()
	var pe *fs.PathError
	if errors.As(f.cause, &pe) {
		msg = pe.Err.Error()
	}
	return ErrFile.Error() + ": " + msg
}

func (f *fileError) Unwrap() []error { return []error{ErrFile, f.cause} }

// Errors splits an error returned by Resolve (joined, possibly wrapped
// again) into its *Error values and whatever else it joins, in order.
func Errors(err error) (refs []*Error, other []error) {
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var se *Error
		if errors.As(err, &se) {
			refs = append(refs, se)
			return
		}
		if err != nil {
			other = append(other, err)
		}
	}
	walk(err)
	return refs, other
}
