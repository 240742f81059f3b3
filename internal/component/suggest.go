package component

// Suggest returns the known name closest to name by edit distance, or "" when
// none is close enough to be a likely typo: one edit, plus one per five
// characters, and never a rewrite of most of a short name.
func Suggest(name string, known []string) string {
	limit := 1 + len(name)/5
	best, bestD := "", limit+1
	for _, k := range known {
		d := distance(name, k)
		if d < bestD && d < len(name) && d < len(k) {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Damerau-Levenshtein (optimal string alignment) distance.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
