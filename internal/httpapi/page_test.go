package httpapi_test

import (
	"errors"
	"math"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/wire"
)

func TestParsePage(t *testing.T) {
	cases := []struct {
		query          string
		page, size     int
		badParam       string
		wantErrMessage string
	}{
		{"", 1, 50, "", ""},
		{"page=3", 3, 50, "", ""},
		{"page_size=1", 1, 1, "", ""},
		{"page_size=100&page=2", 2, 100, "", ""},
		{"page=" + strconv.Itoa(httpapi.MaxPage), httpapi.MaxPage, 50, "", ""},
		{"page=" + strconv.Itoa(httpapi.MaxPage+1), 0, 0, "page", ""},
		{"page=" + strconv.Itoa(math.MaxInt32), 0, 0, "page", ""},
		// 2^62: (page-1)*page_size would wrap around to the first page.
		{"page=4611686018427387904", 0, 0, "page", ""},
		{"page=0", 0, 0, "page", `query parameter "page" must be an integer from 1 to 1000000`},
		{"page=-1", 0, 0, "page", ""},
		{"page=x", 0, 0, "page", ""},
		{"page=", 0, 0, "page", ""},
		{"page=1.5", 0, 0, "page", ""},
		{"page=1&page=2", 0, 0, "page", ""},
		{"page=99999999999999999999999", 0, 0, "page", ""},
		{"page_size=0", 0, 0, "page_size", `query parameter "page_size" must be an integer from 1 to 100`},
		{"page_size=101", 0, 0, "page_size", ""},
		{"page_size=-5", 0, 0, "page_size", ""},
		{"page_size=ten", 0, 0, "page_size", ""},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/x?"+tc.query, nil)
			page, size, err := httpapi.ParsePage(r)
			if tc.badParam == "" {
				if err != nil || page != tc.page || size != tc.size {
					t.Fatalf("got %d, %d, %v; want %d, %d", page, size, err, tc.page, tc.size)
				}
				return
			}
			e, ok := errors.AsType[*httpapi.Error](err)
			if !ok || e.Status != 400 || e.Code != "invalid_query" || e.Details["parameter"] != tc.badParam {
				t.Fatalf("err %#v, want 400 invalid_query on %q", err, tc.badParam)
			}
			if tc.wantErrMessage != "" && e.Message != tc.wantErrMessage {
				t.Errorf("message %q, want %q", e.Message, tc.wantErrMessage)
			}
		})
	}
}

func TestPaginate(t *testing.T) {
	items := []int{1, 2, 3, 4, 5}
	cases := []struct {
		page, size int
		want       wire.Page[int]
	}{
		{1, 2, wire.Page[int]{Items: []int{1, 2}, Page: 1, PageSize: 2, Total: 5}},
		{3, 2, wire.Page[int]{Items: []int{5}, Page: 3, PageSize: 2, Total: 5}},
		{4, 2, wire.Page[int]{Items: []int{}, Page: 4, PageSize: 2, Total: 5}},
		{1, 50, wire.Page[int]{Items: []int{1, 2, 3, 4, 5}, Page: 1, PageSize: 50, Total: 5}},
		{math.MaxInt, 100, wire.Page[int]{Items: []int{}, Page: math.MaxInt, PageSize: 100, Total: 5}},
		{0, 10, wire.Page[int]{Items: []int{}, Page: 0, PageSize: 10, Total: 5}},
	}
	for _, tc := range cases {
		t.Run(strconv.Itoa(tc.page)+"x"+strconv.Itoa(tc.size), func(t *testing.T) {
			if diff := cmp.Diff(tc.want, httpapi.Paginate(items, tc.page, tc.size)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("empty collection encodes items as []", func(t *testing.T) {
		got := httpapi.Paginate([]string(nil), 1, 50)
		if got.Items == nil || got.Total != 0 {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("page does not alias the input", func(t *testing.T) {
		p := httpapi.Paginate(items, 1, 2)
		p.Items[0] = 99
		if items[0] != 1 {
			t.Fatal("Paginate aliased its input")
		}
	})
}
