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

// SecretsDeferring is [Resolver.Secrets] for a Hub that leaves to the node
// what it cannot resolve itself (spec "Configuration: secret references"
// rule 6: node-local secrets are validated and applied where they
// resolve). A reference whose SVC_SECRET_<NAME> the resolver's environment
// does not hold, and that has no default, is returned in deferred (path
// and reference, as an [*Error] wrapping [ErrUnset]) instead of failing:
// the node resolves it from its own environment, or fails there naming
// the same path and reference. A reference that cannot resolve anywhere
// (an empty or invalid name, a nested reference) is in the error. The map
// holds every value resolved, even on error.
func (r Resolver) SecretsDeferring(tree any) (secrets map[string]string, deferred []*Error, err error) {
	w := walker{r: r, only: "secret", secrets: map[string]string{}}
	w.walk(tree)
	var errs []error
	for _, e := range w.errs {
		var se *Error
		if errors.As(e, &se) && errors.Is(se, ErrUnset) {
			deferred = append(deferred, se)
			continue
		}
		errs = append(errs, e)
	}
	return w.secrets, deferred, errors.Join(errs...)
}
