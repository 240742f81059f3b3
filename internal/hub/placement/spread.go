package placement

import "slices"

// Spread says which nodes one job write reaches beside node, the job's
// node after the write (a split job's coordinator): before and after are
// the nodes the job runs on before and after the write (before is empty
// for a new job). Peers are the nodes of after other than node, in the
// order of after: each gets the write's own intent. Fences are the nodes
// of before that are not in after, in the order of before: each gets a
// job_stop that stops the job there whenever that node comes back, so a
// moved job never runs twice.
func Spread(before, after []string, node string) (peers, fences []string) {
	for _, n := range after {
		if n != node {
			peers = append(peers, n)
		}
	}
	for _, n := range before {
		if !slices.Contains(after, n) {
			fences = append(fences, n)
		}
	}
	return peers, fences
}
