package store

import "context"

// listPage fills out with one page of the rows query selects in their
// order (a query without LIMIT), and out's total. With keep nil it counts
// with countQuery and reads only the page (LIMIT and OFFSET appended);
// otherwise it reads the rows in order through keep, holding the kept rows
// of page p and counting every kept one, so that a page filtered by keep
// is as full and its total as exact as an unfiltered one.
//
// keep is a principal's scopes (the Hub's access.Allow). They are evaluated
// here in Go rather than translated into SQL: scopes are globs over node,
// stream, job and rollout ids, and a record's resource depends on its kind,
// so SQL would need GLOB (SQLite only) or LIKE with escapes, whose case
// rules differ between SQLite and PostgreSQL; the Go predicate is the one
// that authorizes requests, so a list never disagrees with what the
// principal may touch, on either database. The tables are bounded (4096
// terminal intents besides the live ones, 100000 audit rows, rollouts as
// many as were created), so one ordered scan per scoped request, holding a
// page at most, is affordable; unscoped principals keep the fast path.
func listPage[T any](ctx context.Context, q querier, p Paging, keep func(T) bool, scan func(scanner) (T, error),
	countQuery, query string, args ...any) ([]T, int, error) {
	items := []T{}
	total := 0
	if keep == nil {
		if err := q.QueryRowContext(ctx, countQuery, args...).Scan(&total); err != nil {
			return items, 0, err
		}
		query += " LIMIT ? OFFSET ?"
		args = append(args[:len(args):len(args)], p.PageSize, p.offset())
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return items, 0, err
	}
	defer rows.Close()
	skip := p.offset()
	for rows.Next() {
		it, err := scan(rows)
		if err != nil {
			return items, 0, err
		}
		if keep == nil {
			items = append(items, it)
			continue
		}
		if !keep(it) {
			continue
		}
		if total >= skip && len(items) < p.PageSize {
			items = append(items, it)
		}
		total++
	}
	return items, total, rows.Err()
}
