package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/flowplane/flowplane/internal/wire"
)

// Page bounds of every collection (API.md). MaxPage keeps
// (page-1)*page_size far from overflowing; no collection the APIs serve
// (100,000 audit records at most) has more pages.
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
	MaxPage         = 1_000_000
)

// ParsePage reads the page (default 1, 1..MaxPage) and page_size (default
// 50, 1..100) query parameters; anything else is 400 invalid_query naming
// the parameter.
func ParsePage(r *http.Request) (page, pageSize int, err error) {
	q := r.URL.Query()
	page, err = intParam(q["page"], "page", 1, 1, MaxPage)
	if err != nil {
		return 0, 0, err
	}
	pageSize, err = intParam(q["page_size"], "page_size", DefaultPageSize, 1, MaxPageSize)
	if err != nil {
		return 0, 0, err
	}
	return page, pageSize, nil
}

// intParam parses a single integer query value in [lo, hi] (hi 0: no upper
// bound), or returns def when absent.
func intParam(vals []string, name string, def, lo, hi int) (int, error) {
	if len(vals) == 0 {
		return def, nil
	}
	rule := fmt.Sprintf("an integer >= %d", lo)
	if hi > 0 {
		rule = fmt.Sprintf("an integer from %d to %d", lo, hi)
	}
	bad := func() error {
		e := BadRequest(CodeInvalidQuery, fmt.Sprintf("query parameter %q must be %s", name, rule))
		e.Details = map[string]any{"parameter": name}
		return e
	}
	if len(vals) > 1 {
		return 0, bad()
	}
	n, err := strconv.Atoi(vals[0])
	if err != nil || n < lo || (hi > 0 && n > hi) {
		return 0, bad()
	}
	return n, nil
}

// Paginate returns page (1-based) of items, pageSize per page, in the
// collection envelope. Items beyond the end give an empty page with the
// total still set; Items is never null.
func Paginate[T any](items []T, page, pageSize int) wire.Page[T] {
	out := wire.Page[T]{Items: []T{}, Page: page, PageSize: pageSize, Total: len(items)}
	if page < 1 || pageSize < 1 {
		return out
	}
	// Compare in page units first so (page-1)*pageSize cannot overflow.
	if page-1 >= (len(items)+pageSize-1)/pageSize {
		return out
	}
	start := (page - 1) * pageSize
	end := min(start+pageSize, len(items))
	out.Items = append(out.Items, items[start:end]...)
	return out
}
