package input

import (
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/component"
)

func batchSizeProp() map[string]any {
	p := component.Prop("integer", "Maximum number of messages per batch.", 1)
	p["minimum"] = 1
	return p
}

// parseDuration reads a duration field, naming it in the error.
func parseDuration(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s: %q is not a non-negative duration such as \"1s\"", field, s)
	}
	return d, nil
}

// checkBatchSize rejects a batch size below one.
func checkBatchSize(n int) error {
	if n < 1 {
		return fmt.Errorf("batch_size: must be at least 1, got %d", n)
	}
	return nil
}
