package rollout

import (
	"errors"
	"fmt"
)

// Waves splits nodes into waves: batchSize nodes each, or, with
// percentages (cumulative, increasing, last 100), ceil(p% of n) nodes
// reached by the end of each wave (empty waves dropped). Exactly one of
// batchSize > 0 and len(percentages) > 0 must be given; the order of
// nodes is kept. nodes must be non-empty, without an empty or repeated
// id. An error names the field at fault (node_ids, batch_size,
// wave_percentages) for a validation answer.
func Waves(nodes []string, batchSize int, percentages []int) ([][]string, error) {
	if len(nodes) == 0 {
		return nil, errors.New("node_ids: at least one node is required")
	}
	seen := make(map[string]bool, len(nodes))
	for i, n := range nodes {
		if n == "" {
			return nil, fmt.Errorf("node_ids[%d]: empty node id", i)
		}
		if seen[n] {
			return nil, fmt.Errorf("node_ids[%d]: node %q given twice", i, n)
		}
		seen[n] = true
	}
	switch {
	case batchSize < 0:
		return nil, fmt.Errorf("batch_size: %d is negative", batchSize)
	case batchSize > 0 && len(percentages) > 0:
		return nil, errors.New("batch_size and wave_percentages: give exactly one")
	case batchSize > 0:
		var waves [][]string
		for i := 0; i < len(nodes); i += batchSize {
			waves = append(waves, append([]string(nil), nodes[i:min(i+batchSize, len(nodes))]...))
		}
		return waves, nil
	case len(percentages) == 0:
		return nil, errors.New("batch_size or wave_percentages: one is required")
	}
	prev := 0
	for i, p := range percentages {
		if p <= prev || p > 100 {
			return nil, fmt.Errorf("wave_percentages[%d]: %d must be above %d and at most 100", i, p, prev)
		}
		prev = p
	}
	if prev != 100 {
		return nil, fmt.Errorf("wave_percentages[%d]: the last must be 100, not %d", len(percentages)-1, prev)
	}
	var waves [][]string
	done := 0
	for _, p := range percentages {
		end := (p*len(nodes) + 99) / 100
		if end > done {
			waves = append(waves, append([]string(nil), nodes[done:end]...))
			done = end
		}
	}
	return waves, nil
}
