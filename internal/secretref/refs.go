package secretref

// Reference is one reference of a known scheme found in a tree, resolved
// or not.
type Reference struct {
	// Path locates the string holding it, written as [Error.Path].
	Path string
	// Ref is the reference as written ("${env:HOME:-/}").
	Ref string
	// Scheme is env, file or secret.
	Scheme string
	// Name is the variable or secret name (without a default), or the
	// file path.
	Name string
}

// References lists every reference of tree in the order a resolution
// meets them, resolving nothing: a caller that must decide whether a
// reference may resolve at all (a node's policy for work a Hub delivers)
// looks at them before any is read. It parses as resolution does (one
// scanner): escaped text and unknown schemes are not references.
func References(tree any) []Reference {
	var refs []Reference
	w := walker{}
	w.visit = func(ref, scheme, body string) {
		name := body
		if scheme != "file" {
			name = cutDefault(body)
		}
		refs = append(refs, Reference{Path: w.pathString(), Ref: ref, Scheme: scheme, Name: name})
	}
	w.walk(tree)
	return refs
}
