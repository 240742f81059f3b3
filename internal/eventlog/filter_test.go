package eventlog

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFilterFromQuery(t *testing.T) {
	since := time.Date(2026, 1, 2, 15, 4, 5, 123_000_000, time.UTC)
	tests := []struct {
		query string
		want  Filter
	}{
		{"", Filter{}},
		{"page=2&page_size=10&last_event_id=4&unknown=x", Filter{}},
		{"kind=node_started", Filter{Kinds: []string{"node_started"}}},
		{"kind=a,%20b,,a&kind=c", Filter{Kinds: []string{"a", "b", "c"}}},
		{"kind=", Filter{}},
		{"node_id=n1&resource_id=s1&operation_id=op&correlation_id=c", Filter{NodeID: "n1", ResourceID: "s1", OperationID: "op", CorrelationID: "c"}},
		{"node_id=", Filter{}},
		{"since_id=17", Filter{AfterID: 17}},
		{"after=17", Filter{AfterID: 17}},
		{"since_id=17&after=17", Filter{AfterID: 17}},
		{"since_id=0", Filter{}},
		{"since=2026-01-02T15:04:05.123Z", Filter{Since: since}},
		{"since=2026-01-02T17:04:05.123%2B02:00", Filter{Since: since}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := FilterFromQuery(q)
			if err != nil {
				t.Fatalf("FilterFromQuery: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFilterFromQueryErrors(t *testing.T) {
	tests := []struct {
		query     string
		wantParam string
	}{
		{"since_id=abc", "since_id"},
		{"since_id=-1", "since_id"},
		{"since_id=1.5", "since_id"},
		{"since_id=99999999999999999999", "since_id"},
		{"after=x", "after"},
		{"since_id=3&after=4", "after"},
		{"since_id=3&since_id=3", "since_id"},
		{"node_id=a&node_id=b", "node_id"},
		{"correlation_id=a&correlation_id=", "correlation_id"},
		{"since=yesterday", "since"},
		{"since=2026-01-02", "since"},
		{"since=2026-01-02T15:04:05", "since"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			_, err = FilterFromQuery(q)
			if !errors.Is(err, ErrInvalidQuery) {
				t.Fatalf("error = %v, want one matching ErrInvalidQuery", err)
			}
			var qe *QueryError
			if !errors.As(err, &qe) || qe.Param != tt.wantParam {
				t.Fatalf("error = %#v, want a *QueryError for %q", err, tt.wantParam)
			}
			if !strings.Contains(err.Error(), tt.wantParam) {
				t.Errorf("error text %q does not name %q", err, tt.wantParam)
			}
		})
	}
}

func TestFilterValuesRoundTrip(t *testing.T) {
	f := Filter{
		Kinds:         []string{"intent_accepted", "command_failed"},
		NodeID:        "node a",
		ResourceID:    "s/1",
		OperationID:   "op&1",
		CorrelationID: "c=1",
		AfterID:       12,
		Since:         time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
	}
	got, err := FilterFromQuery(f.Values())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// FuzzFilterFromQuery checks that any query either fails with a
// *QueryError or yields a filter that survives Values and back.
func FuzzFilterFromQuery(f *testing.F) {
	for _, s := range []string{
		"kind=a,b&node_id=n&since_id=3",
		"after=5&since=2026-01-02T15:04:05.123Z",
		"since=2026-01-02T15:04:05.123456789%2B05:30&resource_id=%20x%20",
		"since_id=1&after=2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		got, err := FilterFromQuery(q)
		if err != nil {
			var qe *QueryError
			if !errors.As(err, &qe) || !errors.Is(err, ErrInvalidQuery) {
				t.Fatalf("error %v is not a *QueryError", err)
			}
			return
		}
		back, err := FilterFromQuery(got.Values())
		if err != nil {
			t.Fatalf("Values %v does not read back: %v", got.Values(), err)
		}
		if diff := cmp.Diff(got, back); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
