// Command hello is a small program the release test packages instead of
// flowplane, to keep the test fast.
package main

import "fmt"

var version = ""

func main() { fmt.Println("hello", version) }
