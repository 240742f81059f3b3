package hub

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestScopedPagingIsExact: a viewer scoped to node:a* (and one scoped to
// rollout:r-a*) over 250 operations, audit rows and rollouts on nodes of
// every name gets full pages and the total of what it may read: page 1,
// a middle page, the last (partial) page and a page past the end.
func TestScopedPagingIsExact(t *testing.T) {
	ph := serveTokens(t, map[string]string{"edge": "viewer node:a*", "rolls": "viewer rollout:r-a*"})
	ctx := context.Background()
	nodes := []string{"a1", "b1", "a2", "c1", "ab", "ba", "a3"} // a* matches 4 of 7, unevenly spread
	const rows = 250
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var ops, audit, rollouts []string // what the scoped principals may read, newest first
	for i := range rows {
		node := nodes[i%len(nodes)]
		now := t0.Add(time.Duration(i) * time.Millisecond)
		id, res := fmt.Sprintf("i%03d", i), fmt.Sprintf("s%03d", i)
		if _, err := ph.h.st.WriteDesired(ctx, store.DesiredWrite{IntentID: id, Operation: wire.CommandStreamDesiredState, NodeID: node,
			Kind: store.KindStream, ResourceID: res, State: "running", Actor: "op", ActorKind: "token", Now: now}); err != nil {
			t.Fatal(err)
		}
		ro := store.Rollout{CreatedAt: now}
		ro.ID, ro.State, ro.UpdatedAt = fmt.Sprintf("r-%c-%03d", node[0], i), wire.RolloutSucceeded, now
		if err := ph.h.st.CreateRollout(ctx, ro); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(node, "a") {
			ops, audit, rollouts = append(ops, id), append(audit, res), append(rollouts, ro.ID)
		}
	}
	slices.Reverse(ops)
	slices.Reverse(audit)
	slices.Reverse(rollouts)
	if len(ops) != 143 {
		t.Fatalf("fixture: %d readable rows, want 143", len(ops))
	}

	const size = 20
	lists := []struct {
		name, who, path string
		want            []string
		ids             func(resp) (ids []string, total int)
	}{
		{"operations", "edge", "/operations", ops, func(r resp) ([]string, int) {
			pg := decode[wire.Page[wire.Operation]](t, r)
			return ids(pg.Items, func(o wire.Operation) string { return o.OperationID }), pg.Total
		}},
		{"audit", "edge", "/audit?action=" + wire.CommandStreamDesiredState, audit, func(r resp) ([]string, int) {
			pg := decode[wire.Page[wire.AuditRecord]](t, r)
			return ids(pg.Items, func(a wire.AuditRecord) string { return a.ResourceID }), pg.Total
		}},
		{"rollouts", "rolls", "/rollouts", rollouts, func(r resp) ([]string, int) {
			pg := decode[wire.Page[wire.Rollout]](t, r)
			return ids(pg.Items, func(ro wire.Rollout) string { return ro.RolloutID }), pg.Total
		}},
	}
	for _, l := range lists {
		for _, page := range []int{1, 4, 8, 9} {
			t.Run(fmt.Sprintf("%s/page%d", l.name, page), func(t *testing.T) {
				sep := "?"
				if strings.Contains(l.path, "?") {
					sep = "&"
				}
				r := ph.as(t, l.who, "GET", fmt.Sprintf("%s%s%spage=%d&page_size=%d", APIPrefix, l.path, sep, page, size), "")
				if r.status != 200 {
					t.Fatalf("%d %s", r.status, r.body)
				}
				got, total := l.ids(r)
				lo, hi := min((page-1)*size, len(l.want)), min(page*size, len(l.want))
				if want := l.want[lo:hi]; total != len(l.want) || !slices.Equal(got, want) {
					t.Fatalf("total %d, items %v; want total %d, items %v", total, got, len(l.want), want)
				}
			})
		}
	}
}

func ids[T any](items []T, id func(T) string) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, id(it))
	}
	return out
}
