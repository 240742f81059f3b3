package operator

import (
	"context"
	"fmt"

	"github.com/flowplane/flowplane/internal/job"
)

// aggregateOp keeps a running aggregate per key and emits the key's
// updated result for every record. With state ttl_ms, a key not updated
// for that long (processing time) is forgotten: checked when the key is
// next seen and swept at watermarks.
type aggregateOp struct {
	keyed
	keys  map[string]*aggKey
	dirty []*aggKey // changed since the last snapshot (tracked only with a table)

	ttl       int64 // ms; 0 keeps keys forever
	nextSweep int64 // processing time of the next sweep
}

// aggKey is one key's running aggregate.
type aggKey struct {
	canon string
	value any
	accs  []acc
	last  int64 // processing time (ms) of the last update, for ttl

	dirty  bool // in aggregateOp.dirty
	stored bool // the table holds an entry for it
	gone   bool // forgotten (ttl): the table entry is to be deleted
}

func newAggregate(id string, c *job.AggregateConfig) (*aggregateOp, error) {
	k, err := newKeyed(id, c.Key, c.Aggregations)
	if err != nil {
		return nil, err
	}
	return &aggregateOp{keyed: k, keys: make(map[string]*aggKey)}, nil
}

// aggBytes estimates a key's live bytes.
func (o *aggregateOp) aggBytes(canon string) int64 {
	return keyBytes(canon) + int64(len(o.aggs))*accBytes
}

func (o *aggregateOp) Open(_ context.Context, oc *Context) error {
	if err := o.open(oc, "aggregate"); err != nil {
		return err
	}
	if oc.Plan != nil && oc.Plan.State != nil && oc.Plan.State.TTLMs > 0 {
		o.ttl = int64(oc.Plan.State.TTLMs)
		o.nextSweep = o.now() + o.ttl
	}
	return o.scan(func(canon string, b []byte) error {
		k := &aggKey{canon: canon, accs: make([]acc, len(o.aggs)), stored: true}
		d := decoder{b: b}
		d.version()
		k.value = d.json()
		k.last = d.varint()
		if n := d.uvarint(); d.err == nil && n != uint64(len(o.aggs)) {
			return fmt.Errorf("operator %s: restore: state holds %d aggregations, the operator has %d", o.id, n, len(o.aggs))
		}
		d.accs(k.accs)
		if err := d.end(); err != nil {
			return fmt.Errorf("operator %s: restore key %q: %w", o.id, canon, err)
		}
		if err := o.grow(o.aggBytes(canon)); err != nil {
			return err
		}
		o.keys[canon] = k
		return nil
	})
}

// now is the processing time in ms; 0 without a clock.
func (o *aggregateOp) now() int64 {
	if o.oc == nil || o.oc.Now == nil {
		return 0
	}
	return o.oc.Now().UnixMilli()
}

func (o *aggregateOp) Process(_ context.Context, in []Record, out Collector) error {
	defer o.release()
	var now int64
	if o.ttl > 0 {
		now = o.now()
	}
	for i := range in {
		r := &in[i]
		canon, value, err := o.keyOf(r)
		if err != nil {
			return err
		}
		k := o.keys[string(canon)]
		if k != nil && o.ttl > 0 && now-k.last >= o.ttl {
			o.forget(k)
			k = nil
		}
		if k == nil {
			c := string(canon)
			if err := o.grow(o.aggBytes(c)); err != nil {
				return err
			}
			k = &aggKey{canon: c, value: value, accs: make([]acc, len(o.aggs))}
			o.keys[c] = k
		}
		if err := add(o.id, o.aggs, k.accs, r); err != nil {
			return err
		}
		k.last = now
		o.touch(k)
		m := make(map[string]any, 1+len(o.aggs))
		m["key"] = k.value
		results(o.aggs, k.accs, m)
		out.Emit(Record{Value: m, Time: r.Time})
	}
	return nil
}

// touch marks k changed since the last snapshot.
func (o *aggregateOp) touch(k *aggKey) {
	if o.table != nil && !k.dirty {
		k.dirty = true
		o.dirty = append(o.dirty, k)
	}
}

// forget drops k (ttl expiry).
func (o *aggregateOp) forget(k *aggKey) {
	delete(o.keys, k.canon)
	k.gone = true
	o.shrink(o.aggBytes(k.canon))
	o.touch(k)
}

// OnWatermark sweeps expired keys, at most every ttl/2 of processing time.
func (o *aggregateOp) OnWatermark(context.Context, int64, Collector) error {
	if o.ttl == 0 {
		return nil
	}
	now := o.now()
	if now < o.nextSweep {
		return nil
	}
	for _, k := range o.keys {
		if now-k.last >= o.ttl {
			o.forget(k)
		}
	}
	o.nextSweep = now + max(o.ttl/2, 1)
	return nil
}

func (o *aggregateOp) Snapshot(context.Context, int64) error {
	var buf []byte
	for _, k := range o.dirty {
		k.dirty = false
		if k.gone {
			if k.stored {
				if err := o.del(k.canon); err != nil {
					return err
				}
				k.stored = false
			}
			continue
		}
		buf = append(buf[:0], codecVersion)
		var err error
		if buf, err = appendJSON(buf, k.value); err != nil {
			return fmt.Errorf("operator %s: snapshot key %q: %w", o.id, k.canon, err)
		}
		buf = appendVarint(buf, k.last)
		buf = appendUvarint(buf, uint64(len(k.accs)))
		if buf, err = appendAccs(buf, k.accs); err != nil {
			return fmt.Errorf("operator %s: snapshot key %q: %w", o.id, k.canon, err)
		}
		if err := o.put(k.canon, buf); err != nil {
			return err
		}
		k.stored = true
	}
	clear(o.dirty)
	o.dirty = o.dirty[:0]
	return nil
}

func (o *aggregateOp) Commit(context.Context, int64) error { return nil }

func (o *aggregateOp) Close(context.Context) error {
	var n int64
	for _, k := range o.keys {
		n += o.aggBytes(k.canon)
	}
	o.shrink(n)
	o.keys = nil
	return nil
}
