package secretref

import "errors"

// Secrets resolves the ${secret:NAME} references of tree alone, as a Hub
// does before it dispatches a configuration (spec: the Hub pre-resolves
// them): it returns NAME -> value for every reference whose
// SVC_SECRET_<NAME> the resolver's environment holds. ${env:} and ${file:}
// references are not looked at: they resolve on the node. A reference
// with a default whose variable is unset or empty is left out (the node
// applies the default). The error joins one [*Error] per reference that
// cannot be resolved, naming its path and reference, never a value; the
// map is nil then.
func (r Resolver) Secrets(tree any) (map[string]string, error) {
	w := walker{r: r, only: "secret", secrets: map[string]string{}}
	w.walk(tree)
	if len(w.errs) > 0 {
		return nil, errors.Join(w.errs...)
	}
	return w.secrets, nil
}
