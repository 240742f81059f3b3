package operator

import (
	"fmt"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/state"
)

// keyed is what aggregate and window share: the key, the aggregations and
// the state plumbing (budget, table, key groups).
type keyed struct {
	id   string
	key  *Key
	aggs []aggregation

	oc     *Context
	budget *state.Budget // nil: unlimited
	table  *state.Table  // nil: memory only (no Store)
	maxPar int
	buf    []byte // canonical key of the record at hand
}

// keyBytes estimates the live bytes of a key's entry besides its
// accumulators and windows: the map entry, the canonical key twice (map
// key and entry) and the key value.
func keyBytes(canon string) int64 { return 128 + 3*int64(len(canon)) }

func newKeyed(id, key string, aggs []job.Aggregation) (keyed, error) {
	k, err := compileExpr("config.key", key)
	if err != nil {
		return keyed{}, err
	}
	a, err := compileAggregations(aggs)
	if err != nil {
		return keyed{}, err
	}
	return keyed{id: id, key: &Key{expr: k}, aggs: a}, nil
}

// open takes what the operator needs from oc; table names its state table.
func (k *keyed) open(oc *Context, table string) error {
	k.oc = oc
	k.budget = oc.Budget
	if oc.Store == nil {
		return nil
	}
	if oc.Plan == nil || oc.Plan.MaxParallelism <= 0 {
		return fmt.Errorf("operator %s: keyed state needs the plan's max_parallelism", k.id)
	}
	k.maxPar = oc.Plan.MaxParallelism
	k.table = oc.Store.Table(k.id, table)
	return nil
}

// grow accounts n more live bytes.
func (k *keyed) grow(n int64) error {
	if k.budget == nil {
		return nil
	}
	if err := k.budget.Grow(n); err != nil {
		return fmt.Errorf("operator %s: %w", k.id, err)
	}
	return nil
}

func (k *keyed) shrink(n int64) {
	if k.budget != nil {
		k.budget.Shrink(n)
	}
}

// keyOf evaluates r's key into k.buf.
func (k *keyed) keyOf(r *Record) (canon []byte, value any, err error) {
	k.buf, value, err = k.key.Eval(r, k.buf[:0])
	if err != nil {
		return nil, nil, fmt.Errorf("operator %s: %w", k.id, err)
	}
	return k.buf, value, nil
}

// release drops the evaluators' references to the last record.
func (k *keyed) release() {
	k.key.expr.release()
	for i := range k.aggs {
		if e := k.aggs[i].expr; e != nil {
			e.release()
		}
	}
}

// put writes a key's entry into the table.
func (k *keyed) put(canon string, value []byte) error {
	key := []byte(canon)
	if err := k.table.Put(job.KeyGroup(key, k.maxPar), key, value); err != nil {
		return fmt.Errorf("operator %s: snapshot: %w", k.id, err)
	}
	return nil
}

// del removes a key's entry from the table.
func (k *keyed) del(canon string) error {
	key := []byte(canon)
	if err := k.table.Delete(job.KeyGroup(key, k.maxPar), key); err != nil {
		return fmt.Errorf("operator %s: snapshot: %w", k.id, err)
	}
	return nil
}

// scan reads back every entry of the subtask's key groups.
func (k *keyed) scan(fn func(canon string, value []byte) error) error {
	if k.table == nil {
		return nil
	}
	err := k.table.Scan(k.oc.KeyGroups, func(_ int, key, value []byte) error {
		return fn(string(key), value)
	})
	if err != nil {
		return fmt.Errorf("operator %s: restore: %w", k.id, err)
	}
	return nil
}
