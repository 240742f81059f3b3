package processor

import "github.com/flowplane/flowplane/internal/expression"

// ErrNotObject is returned by merge() for an argument that is not an object.
// The expression language (merge, uuid and expr's builtins) lives in
// package expression, shared with the job operators.
var ErrNotObject = expression.ErrNotObject
