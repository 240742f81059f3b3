package httpapi_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/httpapi"
)

func TestErrorEnvelope(t *testing.T) {
	cases := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   string
		wantHeader map[string]string
		wantDetail map[string]any
	}{
		{"bad request", httpapi.BadRequest(httpapi.CodeInvalidQuery, "bad q"), 400, "invalid_query", nil, nil},
		{"unauthorized", httpapi.Unauthorized("session_expired", "expired"), 401, "session_expired",
			map[string]string{"WWW-Authenticate": "Bearer"}, nil},
		{"bare 401 gets WWW-Authenticate", httpapi.NewError(401, "unauthorized", "no"), 401, "unauthorized",
			map[string]string{"WWW-Authenticate": "Bearer"}, nil},
		{"forbidden", httpapi.Forbidden("no"), 403, "forbidden", nil, nil},
		{"not found", httpapi.NotFound("stream_not_found", "no such stream"), 404, "stream_not_found", nil, nil},
		{"method not allowed", httpapi.MethodNotAllowed([]string{"GET", "HEAD"}), 405, "method_not_allowed",
			map[string]string{"Allow": "GET, HEAD"}, nil},
		{"conflict", httpapi.Conflict("job_must_be_stopped", "stop it"), 409, "job_must_be_stopped", nil, nil},
		{"precondition", httpapi.GenerationConflict(3, 5, map[string]any{"job_id": "j"}), 412, "generation_conflict", nil,
			map[string]any{"expected_generation": 3.0, "current_generation": 5.0, "resource": map[string]any{"job_id": "j"}}},
		{"too large", httpapi.BodyTooLarge(10), 413, "body_too_large", nil, map[string]any{"limit_bytes": 10.0}},
		{"media type", httpapi.UnsupportedMediaType("application/json"), 415, "unsupported_media_type", nil,
			map[string]any{"accepted": []any{"application/json"}}},
		{"validation", httpapi.Validation([]httpapi.FieldProblem{{Path: "a.b", Message: "required"}}), 422, "validation_failed", nil,
			map[string]any{"errors": []any{map[string]any{"path": "a.b", "message": "required"}}}},
		{"validation empty", httpapi.Validation(nil), 422, "validation_failed", nil, map[string]any{"errors": []any{}}},
		{"unavailable", httpapi.Unavailable("recovering", "starting"), 503, "recovering", nil, nil},
		{"wrapped Error", fmt.Errorf("ctx: %w", httpapi.NotFound("not_found", "gone")), 404, "not_found", nil, nil},
		{"plain error", errors.New("disk /secret/path exploded"), 500, "internal", nil, nil},
		{"Error with bad status", httpapi.NewError(200, "weird", "x"), 500, "internal", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log, _ := newLogger()
			url := serve(t, []httpapi.Route{{Method: "GET", Pattern: "/x",
				Handler: func(http.ResponseWriter, *http.Request) error { return tc.err }}}, httpapi.Options{Logger: log})
			resp := do(t, "GET", url+"/x", nil)
			if resp.status != tc.wantStatus {
				t.Fatalf("status %d, want %d; body %s", resp.status, tc.wantStatus, resp.body)
			}
			p := resp.problem(t)
			if p.Code != tc.wantCode {
				t.Errorf("code %q, want %q", p.Code, tc.wantCode)
			}
			if p.Message == "" {
				t.Error("empty message")
			}
			for k, v := range tc.wantHeader {
				if got := resp.header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if diff := cmp.Diff(tc.wantDetail, p.Details); diff != "" {
				t.Errorf("details (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInternalErrorHidesCauseAndLogsIt(t *testing.T) {
	const cause = "open /var/lib/secret-file: permission denied"
	cases := []struct {
		name    string
		handler httpapi.HandlerFunc
		code    string
	}{
		{"plain error", func(http.ResponseWriter, *http.Request) error { return errors.New(cause) }, "internal"},
		{"5xx Error with cause", func(http.ResponseWriter, *http.Request) error {
			return httpapi.Unavailable("storage_unavailable", "storage is unavailable").WithCause(errors.New(cause))
		}, "storage_unavailable"},
		{"panic", func(http.ResponseWriter, *http.Request) error { panic(cause) }, "internal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log, logs := newLogger()
			url := serve(t, []httpapi.Route{{Method: "POST", Pattern: "/x", Handler: tc.handler}}, httpapi.Options{Logger: log})
			resp := do(t, "POST", url+"/x", nil, "X-Correlation-ID", "corr-500")
			p := resp.problem(t)
			if p.Code != tc.code || resp.status < 500 {
				t.Fatalf("got %d %q", resp.status, p.Code)
			}
			if strings.Contains(string(resp.body), "secret") {
				t.Errorf("cause leaked to the client: %s", resp.body)
			}
			out := logs.String()
			if !strings.Contains(out, cause) || !strings.Contains(out, `"correlation_id":"corr-500"`) {
				t.Errorf("log lacks cause or correlation id:\n%s", out)
			}
		})
	}
}

func TestErrorAfterWriteIsOnlyLogged(t *testing.T) {
	log, logs := newLogger()
	url := serve(t, []httpapi.Route{{Method: "GET", Pattern: "/x", Handler: func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusAccepted)
		return errors.New("late failure")
	}}}, httpapi.Options{Logger: log})
	resp := do(t, "GET", url+"/x", nil)
	if resp.status != http.StatusAccepted || len(resp.body) != 0 {
		t.Fatalf("got %d %s", resp.status, resp.body)
	}
	if !strings.Contains(logs.String(), "late failure") {
		t.Errorf("late failure not logged: %s", logs.String())
	}
}

func TestWriteJSONEncodingError(t *testing.T) {
	url := serve(t, []httpapi.Route{{Method: "GET", Pattern: "/x", Handler: func(w http.ResponseWriter, r *http.Request) error {
		return httpapi.WriteJSON(w, http.StatusOK, map[string]any{"f": func() {}})
	}}}, httpapi.Options{Logger: discard()})
	resp := do(t, "GET", url+"/x", nil)
	if resp.status != 500 || resp.problem(t).Code != "internal" {
		t.Fatalf("got %d %s", resp.status, resp.body)
	}
}

func TestErrorString(t *testing.T) {
	e := httpapi.NotFound("not_found", "gone").WithCause(errors.New("inner"))
	if got, want := e.Error(), "404 not_found: gone: inner"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(e, e.Cause) {
		t.Error("Unwrap does not reach the cause")
	}
}
