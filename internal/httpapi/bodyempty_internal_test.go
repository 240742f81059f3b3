package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestBodyEmpty: a body of unknown length (chunked) is peeked at one byte,
// which is put back for the handler.
func TestBodyEmpty(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		hasBody bool
		length  int64
		empty   bool
	}{
		{"no body", "", false, 0, true},
		{"known empty", "", true, 0, true},
		{"known length", "{}", true, 2, false},
		{"unknown length, empty", "", true, -1, true},
		{"unknown length, data", `{"a":1}`, true, -1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.NewRequest("POST", "http://127.0.0.1/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.hasBody {
				r.Body = io.NopCloser(strings.NewReader(tc.body))
			}
			r.ContentLength = tc.length
			empty, err := bodyEmpty(r)
			if err != nil || empty != tc.empty {
				t.Fatalf("bodyEmpty = %v, %v; want %v", empty, err, tc.empty)
			}
			if !tc.hasBody {
				return
			}
			got, err := io.ReadAll(r.Body)
			if err != nil || string(got) != tc.body {
				t.Errorf("the handler reads %q (%v), want %q", got, err, tc.body)
			}
		})
	}
}
