package buffer

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestQueryTables(t *testing.T) {
	tests := []struct {
		query string
		want  []string
	}{
		{"SELECT * FROM orders JOIN shipments ON (orders.order_id = shipments.order_id)", []string{"orders", "shipments"}},
		{"SELECT a.user_id, b.metadata FROM events a JOIN metadata b ON a.user_id = b.user_id", []string{"events", "metadata"}},
		{"select * from Orders as o left join Shipments s using (id)", []string{"orders", "shipments"}},
		{"SELECT * FROM a, b AS x, c WHERE a.k = b.k", []string{"a", "b", "c"}},
		{`SELECT * FROM "Order Lines" JOIN [stock] ON 1 JOIN ` + "`x``y`" + ` ON 1`, []string{"order lines", "stock", "x`y"}},
		{"WITH recent AS (SELECT * FROM orders WHERE t > 5) SELECT * FROM recent JOIN shipments ON 1", []string{"orders", "shipments"}},
		{"SELECT * FROM (SELECT * FROM orders) o JOIN json_each(o.tags) ON 1", []string{"orders"}},
		{"SELECT 'FROM fake' AS s, x -- FROM comment\nFROM real /* JOIN hidden */ WHERE 1", []string{"real"}},
		{"SELECT * FROM orders o1 JOIN orders o2 ON o1.k = o2.k", []string{"orders"}},
		{"SELECT 1", nil},
		{"SELECT * FROM", nil},
		{"SELECT * FROM 'unterminated", nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, queryTables(tt.query)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzQueryTables: the scan never panics, and every name it returns is
// lower case, not empty, and returned once.
func FuzzQueryTables(f *testing.F) {
	for _, s := range []string{"SELECT * FROM a JOIN b ON 1", `FROM "x""y"`, "FROM [a", "/* FROM", "WITH c AS (", "FROM a, b AS", `FROM ""`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		seen := map[string]bool{}
		for _, n := range queryTables(q) {
			if n == "" || n != strings.ToLower(n) || seen[n] {
				t.Errorf("name %q from %q (names %v)", n, q, queryTables(q))
			}
			seen[n] = true
		}
	})
}
