//go:build wasip1

// Command upper is the udf of the operator tests, built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o upper.wasm
//
// Its function upper reads a JSON object, upper-cases its field "name",
// adds "len" (the input's length in bytes) and returns the object, or
// null (drop the record) when the object's "drop" is true. For the
// sandbox tests it also reads the file named by "read" (answering with
// "read_error") and allocates "alloc_mib" MiB.
package main

import (
	"encoding/json"
	"os"
	"strings"
	"unsafe"
)

// in and out keep the buffers handed to the host alive until its next call.
var in, out []byte

//go:wasmexport alloc
func alloc(size int32) int32 {
	in = make([]byte, size)
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(in))))
}

//go:wasmexport upper
func upper(ptr, size int32) int64 {
	data := unsafe.Slice((*byte)(unsafe.Pointer(uintptr(ptr))), size)
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		out = []byte(`{"error": "not an object"}`)
	} else if v["drop"] == true {
		out = []byte("null")
	} else {
		if name, ok := v["read"].(string); ok {
			if _, err := os.ReadFile(name); err != nil {
				v["read_error"] = err.Error()
			}
		}
		if n, ok := v["alloc_mib"].(float64); ok {
			big := make([]byte, int(n)<<20)
			big[len(big)-1] = 1
			v["allocated"] = len(big)
		}
		if s, ok := v["name"].(string); ok {
			v["name"] = strings.ToUpper(s)
		}
		v["len"] = len(data)
		out, _ = json.Marshal(v)
	}
	return int64(uintptr(unsafe.Pointer(unsafe.SliceData(out))))<<32 | int64(len(out))
}

func main() {}
