// Package operator holds the contract every job operator implements and
// the built-in transforming operators: map, filter, aggregate, window and
// udf. Source and sink operators wrap components and live in the kernel.
//
// Operators are called from one task goroutine only and hold no locks. They
// do no I/O of their own beyond the state tables the kernel hands them.
package operator
