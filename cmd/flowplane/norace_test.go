//go:build !race

package main

// raceEnabled: the race detector slows the Hub child (the same binary)
// several times, so load tests scale down.
const raceEnabled = false
