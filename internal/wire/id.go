package wire

import "regexp"

// IDPattern is the one shape of node, stream and job ids, wherever they
// appear: the configuration (streams[].id, jobs[].id, health_check.node_id),
// the agent protocol and the Hub's routes. It keeps ids printable, free of
// NUL, CR/LF, spaces, slashes and invalid UTF-8, and at most 128 bytes.
// The configuration's struct tags repeat it literally (a tag cannot name a
// constant); a test in internal/config holds them equal.
const IDPattern = `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`

// IDRule is IDPattern said for people, for validation messages.
const IDRule = "1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"

var idRE = regexp.MustCompile(IDPattern)

// ValidID reports whether id matches IDPattern.
func ValidID(id string) bool { return idRE.MatchString(id) }
