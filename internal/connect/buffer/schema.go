package buffer

import (
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/component"
)

func countProp(desc string, def any) map[string]any {
	p := component.Prop("integer", desc, def)
	p["minimum"] = 1
	return p
}

// parseDuration reads a positive duration field, naming it in the error.
func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("%s: required", field)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive duration such as \"1s\"", field, s)
	}
	return d, nil
}
