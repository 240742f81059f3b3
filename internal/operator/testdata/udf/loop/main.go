//go:build wasip1

// Command loop is a udf that never returns: the operator tests check that
// the task's context stops it.
package main

import "unsafe"

var in []byte

//go:wasmexport alloc
func alloc(size int32) int32 {
	in = make([]byte, size)
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(in))))
}

var n int64

//go:wasmexport spin
func spin(ptr, size int32) int64 {
	for {
		n++
	}
}

func main() {}
