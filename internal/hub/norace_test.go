//go:build !race

package hub

// raceEnabled: the race detector makes each stored row several times
// dearer, so load tests scale down.
const raceEnabled = false
