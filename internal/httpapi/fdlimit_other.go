//go:build !unix

package httpapi

// fileLimit returns 0: the descriptor limit is not known here.
func fileLimit() int { return 0 }
