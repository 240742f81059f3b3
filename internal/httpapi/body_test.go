package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/httpapi"
)

type spec struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
	Inner struct {
		On bool `json:"on"`
	} `json:"inner"`
}

func TestDecodeJSON(t *testing.T) {
	url := serve(t, []httpapi.Route{
		{Method: "POST", Pattern: "/required", Handler: func(w http.ResponseWriter, r *http.Request) error {
			var v spec
			if err := httpapi.DecodeJSON(r, &v, 64); err != nil {
				return err
			}
			return httpapi.WriteJSON(w, 200, v)
		}},
		{Method: "POST", Pattern: "/optional", Handler: func(w http.ResponseWriter, r *http.Request) error {
			v := spec{Name: "default"}
			present, err := httpapi.DecodeOptionalJSON(r, &v, 64)
			if err != nil {
				return err
			}
			return httpapi.WriteJSON(w, 200, map[string]any{"present": present, "name": v.Name})
		}},
	}, httpapi.Options{})
	const ct = "application/json"
	cases := []struct {
		name, path, contentType string
		body                    io.Reader
		status                  int
		code, message           string
		field                   string
		respBody                string
	}{
		{name: "valid", path: "/required", contentType: ct, body: str(`{"name":"a","count":2,"inner":{"on":true}}`),
			status: 200, respBody: `{"name":"a","count":2,"inner":{"on":true}}`},
		{name: "charset utf-8 tolerated", path: "/required", contentType: "application/json; charset=UTF-8", body: str(`{"name":"a"}`), status: 200,
			respBody: `{"name":"a","count":0,"inner":{"on":false}}`},
		{name: "trailing whitespace ok", path: "/required", contentType: ct, body: str("{}\n\t "), status: 200,
			respBody: `{"name":"","count":0,"inner":{"on":false}}`},
		{name: "other charset", path: "/required", contentType: "application/json; charset=latin1", body: str(`{}`),
			status: 415, code: "unsupported_media_type"},
		{name: "text/plain", path: "/required", contentType: "text/plain", body: str(`{}`), status: 415, code: "unsupported_media_type"},
		{name: "yaml", path: "/required", contentType: "application/yaml", body: str(`a: 1`), status: 415, code: "unsupported_media_type"},
		{name: "missing content type with body", path: "/required", body: str(`{}`), status: 415, code: "unsupported_media_type"},
		{name: "garbled content type", path: "/required", contentType: "/;;", body: str(`{}`), status: 415, code: "unsupported_media_type"},
		{name: "empty body", path: "/required", contentType: ct, body: str(""), status: 400, code: "invalid_json",
			message: "a JSON request body is required"},
		{name: "no body, no content type: the body is missing", path: "/required", status: 400, code: "invalid_json"},
		{name: "no body", path: "/required", contentType: ct, status: 400, code: "invalid_json",
			message: "a JSON request body is required"},
		{name: "whitespace body", path: "/required", contentType: ct, body: str("  \n"), status: 400, code: "invalid_json"},
		{name: "null body", path: "/required", contentType: ct, body: str("null"), status: 400, code: "invalid_json",
			message: "the request body must not be null"},
		{name: "unknown field", path: "/required", contentType: ct, body: str(`{"name":"a","foo":1}`), status: 400,
			code: "invalid_json", message: `unknown field "foo"`, field: "foo"},
		{name: "unknown nested field", path: "/required", contentType: ct, body: str(`{"inner":{"off":1}}`), status: 400,
			code: "invalid_json", message: `unknown field "off"`, field: "off"},
		{name: "wrong type", path: "/required", contentType: ct, body: str(`{"count":"many"}`), status: 400,
			code: "invalid_json", message: `field "count" must be an integer, not string`, field: "count"},
		{name: "wrong type hides value", path: "/required", contentType: ct, body: str(`{"name":12345}`), status: 400,
			code: "invalid_json", message: `field "name" must be a string, not number`, field: "name"},
		{name: "array instead of object", path: "/required", contentType: ct, body: str(`[1]`), status: 400,
			code: "invalid_json", message: "the request body must be an object, not array"},
		{name: "syntax error", path: "/required", contentType: ct, body: str(`{"name":}`), status: 400,
			code: "invalid_json", message: "malformed JSON at byte 9"},
		{name: "truncated", path: "/required", contentType: ct, body: str(`{"name":"a"`), status: 400,
			code: "invalid_json", message: "malformed JSON: unexpected end of body"},
		{name: "trailing data", path: "/required", contentType: ct, body: str(`{"name":"a"} {}`), status: 400,
			code: "invalid_json", message: "unexpected data after the JSON value"},
		{name: "trailing garbage", path: "/required", contentType: ct, body: str(`{"name":"a"}x`), status: 400,
			code: "invalid_json", message: "unexpected data after the JSON value"},
		{name: "over the decoder cap", path: "/required", contentType: ct, body: str(`{"name":"` + strings.Repeat("a", 100) + `"}`),
			status: 413, code: "body_too_large"},
		{name: "optional absent", path: "/optional", contentType: ct, status: 200, respBody: `{"name":"default","present":false}`},
		{name: "optional empty with type", path: "/optional", contentType: ct, body: str(""), status: 200,
			respBody: `{"name":"default","present":false}`},
		{name: "optional present", path: "/optional", contentType: ct, body: str(`{"name":"x"}`), status: 200,
			respBody: `{"name":"x","present":true}`},
		{name: "optional unknown field", path: "/optional", contentType: ct, body: str(`{"nope":1}`), status: 400,
			code: "invalid_json", field: "nope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, "POST", url+tc.path, tc.body, "Content-Type", tc.contentType)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			if tc.respBody != "" {
				if diff := cmp.Diff(tc.respBody, strings.TrimSpace(string(resp.body))); diff != "" {
					t.Errorf("body (-want +got):\n%s", diff)
				}
				return
			}
			p := resp.problem(t)
			if p.Code != tc.code {
				t.Errorf("code %q, want %q", p.Code, tc.code)
			}
			if tc.message != "" && p.Message != tc.message {
				t.Errorf("message %q, want %q", p.Message, tc.message)
			}
			if tc.field != "" && p.Details["field"] != tc.field {
				t.Errorf("details.field %v, want %q", p.Details["field"], tc.field)
			}
			if strings.Contains(p.Message, "12345") || strings.Contains(p.Message, "Go struct") {
				t.Errorf("message leaks value or Go types: %q", p.Message)
			}
		})
	}
}

func TestReadBodyOtherMediaTypes(t *testing.T) {
	accepted := []string{"application/json", "application/yaml", "text/yaml", "application/toml"}
	url := serve(t, []httpapi.Route{{Method: "POST", Pattern: "/validate", Handler: func(w http.ResponseWriter, r *http.Request) error {
		mt, body, err := httpapi.ReadBody(r, 0, accepted...)
		if err != nil {
			return err
		}
		return httpapi.WriteJSON(w, 200, map[string]string{"type": mt, "body": string(body)})
	}}}, httpapi.Options{})
	cases := []struct {
		ct     string
		status int
		want   string
	}{
		{"application/yaml", 200, `{"body":"a: 1","type":"application/yaml"}`},
		{"text/yaml; charset=utf-8", 200, `{"body":"a: 1","type":"text/yaml"}`},
		{"application/xml", 415, ""},
	}
	for _, tc := range cases {
		t.Run(tc.ct, func(t *testing.T) {
			resp := do(t, "POST", url+"/validate", str("a: 1"), "Content-Type", tc.ct)
			if resp.status != tc.status {
				t.Fatalf("status %d: %s", resp.status, resp.body)
			}
			if tc.status != 200 {
				p := resp.problem(t)
				if diff := cmp.Diff(map[string]any{"accepted": []any{"application/json", "application/yaml", "text/yaml", "application/toml"}}, p.Details); diff != "" {
					t.Errorf("details (-want +got):\n%s", diff)
				}
				return
			}
			if got := strings.TrimSpace(string(resp.body)); got != tc.want {
				t.Errorf("body %s, want %s", got, tc.want)
			}
		})
	}
}
