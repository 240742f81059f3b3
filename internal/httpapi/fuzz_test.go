package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func FuzzParseIfMatch(f *testing.F) {
	for _, s := range []string{"", "*", `"generation-0"`, `W/"generation-12"`, `"generation-07"`,
		`"generation-9223372036854775808"`, `"generation-1", "generation-2"`, "W/", `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		gen, matchAny, present, err := ParseIfMatch(header)
		if err != nil {
			if e, ok := errors.AsType[*Error](err); !ok || e.Status != 400 || e.Code != CodeInvalidHeader {
				t.Fatalf("error %v is not 400 invalid_header", err)
			}
			if !present {
				t.Fatal("an error for an absent header")
			}
			return
		}
		v := strings.TrimSpace(header)
		switch {
		case !present:
			if v != "" {
				t.Fatalf("%q parsed as absent", header)
			}
		case matchAny:
			if v != "*" {
				t.Fatalf("%q parsed as *", header)
			}
		default:
			// Every accepted tag is exactly what ETag writes (weak or strong).
			if v != ETag(gen) && v != "W/"+ETag(gen) {
				t.Fatalf("%q parsed as generation %d", header, gen)
			}
			if gen < 0 {
				t.Fatalf("negative generation %d", gen)
			}
		}
	})
}

func FuzzCorrelationID(f *testing.F) {
	for _, s := range []string{"abc", "", strings.Repeat("x", 128), strings.Repeat("x", 129), "caf\u00e9", "a\x00b", "a b"} {
		f.Add(s)
	}
	rt := NewRouter([]Route{{Method: "GET", Pattern: "/x", Handler: func(w http.ResponseWriter, r *http.Request) error {
		return WriteJSON(w, 200, CorrelationID(r.Context()))
	}}}, Options{})
	f.Fuzz(func(t *testing.T, id string) {
		valid := validToken(id, maxCorrelationIDLength)
		want := len(id) >= 1 && len(id) <= 128
		for i := 0; i < len(id); i++ {
			want = want && id[i] >= ' ' && id[i] <= '~'
		}
		if valid != want {
			t.Fatalf("validToken(%q) = %v, want %v", id, valid, want)
		}
		req := httptest.NewRequest("GET", "/x", nil)
		req.Host = "localhost" // no token: only loopback Host values pass
		req.Header["X-Correlation-Id"] = []string{id}
		w := httptest.NewRecorder()
		rt.ServeHTTP(w, req)
		got := w.Header().Get(HeaderCorrelationID)
		if valid {
			if w.Code != 200 || got != id {
				t.Fatalf("valid id %q: status %d, echoed %q", id, w.Code, got)
			}
			return
		}
		if w.Code != 400 || got == id || !validToken(got, maxCorrelationIDLength) {
			t.Fatalf("invalid id %q: status %d, header %q", id, w.Code, got)
		}
	})
}
