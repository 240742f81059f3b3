package httpapi_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/httpapi"
)

func TestETag(t *testing.T) {
	for gen, want := range map[int64]string{0: `"generation-0"`, 7: `"generation-7"`, 1 << 40: `"generation-1099511627776"`} {
		if got := httpapi.ETag(gen); got != want {
			t.Errorf("ETag(%d) = %s, want %s", gen, got, want)
		}
	}
}

func TestParseIfMatch(t *testing.T) {
	type result struct {
		Gen              int64
		Any, Present, OK bool
	}
	cases := map[string]result{
		"":                                  {Present: false, OK: true},
		"   ":                               {Present: false, OK: true},
		"*":                                 {Any: true, Present: true, OK: true},
		` * `:                               {Any: true, Present: true, OK: true},
		`"generation-0"`:                    {Gen: 0, Present: true, OK: true},
		`"generation-42"`:                   {Gen: 42, Present: true, OK: true},
		`W/"generation-42"`:                 {Gen: 42, Present: true, OK: true},
		` "generation-9223372036854775807"`: {Gen: 9223372036854775807, Present: true, OK: true},
		`"generation-9223372036854775808"`:  {Present: true},
		`generation-42`:                     {Present: true},
		`"generation-"`:                     {Present: true},
		`"generation--1"`:                   {Present: true},
		`"generation-+1"`:                   {Present: true},
		`"generation-07"`:                   {Present: true},
		`"generation-4 2"`:                  {Present: true},
		`"generation-42`:                    {Present: true},
		`"gen-42"`:                          {Present: true},
		`w/"generation-42"`:                 {Present: true},
		`W/ "generation-42"`:                {Present: true},
		`"generation-1", "generation-2"`:    {Present: true},
		`**`:                                {Present: true},
		`"*"`:                               {Present: true},
	}
	for in, want := range cases {
		t.Run(in, func(t *testing.T) {
			gen, anyGen, present, err := httpapi.ParseIfMatch(in)
			got := result{Gen: gen, Any: anyGen, Present: present, OK: err == nil}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err != nil {
				if e, ok := errors.AsType[*httpapi.Error](err); !ok || e.Status != 400 || e.Code != "invalid_header" {
					t.Errorf("err %v, want 400 invalid_header", err)
				}
			}
		})
	}
}

func TestCheckIfMatch(t *testing.T) {
	res := map[string]any{"node_id": "n1", "stream_id": "s1"}
	cases := []struct {
		header string
		status int // 0: nil error
	}{
		{"", 0},
		{"*", 0},
		{`"generation-5"`, 0},
		{`W/"generation-5"`, 0},
		{`"generation-4"`, 412},
		{`"generation-6"`, 412},
		{`junk`, 400},
	}
	for _, tc := range cases {
		t.Run(tc.header, func(t *testing.T) {
			err := httpapi.CheckIfMatch(tc.header, 5, res)
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				return
			}
			e, ok := errors.AsType[*httpapi.Error](err)
			if !ok || e.Status != tc.status {
				t.Fatalf("err %v, want status %d", err, tc.status)
			}
			if tc.status == 412 {
				expected, _, _, _ := httpapi.ParseIfMatch(tc.header)
				if e.Code != "generation_conflict" || e.Details["current_generation"] != int64(5) ||
					e.Details["expected_generation"] != expected ||
					!cmp.Equal(e.Details["resource"], res) {
					t.Errorf("problem %+v", e)
				}
			}
		})
	}
}

func TestGenerationConflictDetails(t *testing.T) {
	e := httpapi.GenerationConflict(3, 4, nil)
	want := map[string]any{"expected_generation": int64(3), "current_generation": int64(4), "resource": map[string]any{}}
	if diff := cmp.Diff(want, e.Details); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if e.Status != 412 || e.Code != "generation_conflict" {
		t.Errorf("got %d %s", e.Status, e.Code)
	}
}
