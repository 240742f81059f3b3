package schema

import (
	"errors"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ValidateWhole is Validate without checking array items one at a time:
// the whole document in one pass, as the validator would.
func (v *Validator) ValidateWhole(tree any) []Problem {
	var out []Problem
	if err := v.schema.Validate(tree); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return []Problem{{Message: err.Error()}}
		}
		v.leaves(ve, nil, &out)
	}
	slices.SortStableFunc(out, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
	return slices.Compact(out)
}
