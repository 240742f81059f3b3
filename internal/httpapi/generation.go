package httpapi

import (
	"fmt"
	"strconv"
	"strings"
)

const etagPrefix = "generation-"

// ETag returns the entity tag of a resource generation: "generation-<n>",
// quotes included, ready for the ETag header.
func ETag(gen int64) string {
	return `"` + etagPrefix + strconv.FormatInt(gen, 10) + `"`
}

// ParseIfMatch parses an If-Match header value: `"generation-<n>"`,
// `W/"generation-<n>"` or `*` (matchAny), with surrounding spaces allowed. An
// empty header is not present; anything else is 400 invalid_header. <n> is
// a non-negative decimal without leading zeros.
func ParseIfMatch(header string) (gen int64, matchAny bool, present bool, err error) {
	v := strings.TrimSpace(header)
	if v == "" {
		return 0, false, false, nil
	}
	if v == "*" {
		return 0, true, true, nil
	}
	tag := strings.TrimPrefix(v, "W/")
	digits, ok := strings.CutPrefix(tag, `"`+etagPrefix)
	if ok {
		digits, ok = strings.CutSuffix(digits, `"`)
	}
	if ok {
		ok = digits != "" && (digits == "0" || digits[0] != '0')
		for i := 0; ok && i < len(digits); i++ {
			ok = digits[i] >= '0' && digits[i] <= '9'
		}
	}
	if ok {
		gen, err = strconv.ParseInt(digits, 10, 64)
		ok = err == nil
	}
	if !ok {
		return 0, false, true, BadRequest(CodeInvalidHeader,
			`If-Match must be "generation-<n>", W/"generation-<n>" or *`)
	}
	return gen, false, true, nil
}

// CheckIfMatch applies an If-Match header to a resource at generation
// current: nil when absent, `*` or equal; 400 invalid_header when malformed;
// otherwise GenerationConflict with resource (e.g. {"node_id","stream_id"}).
func CheckIfMatch(header string, current int64, resource map[string]any) error {
	gen, anyGen, present, err := ParseIfMatch(header)
	switch {
	case err != nil:
		return err
	case !present, anyGen, gen == current:
		return nil
	}
	return GenerationConflict(gen, current, resource)
}

// GenerationConflict is a 412 generation_conflict: the client expected
// generation expected, the resource is at current.
func GenerationConflict(expected, current int64, resource map[string]any) *Error {
	e := PreconditionFailed(CodeGenerationConflict,
		fmt.Sprintf("If-Match expected generation %d but the current generation is %d", expected, current))
	if resource == nil {
		resource = map[string]any{}
	}
	e.Details = map[string]any{
		"expected_generation": expected,
		"current_generation":  current,
		"resource":            resource,
	}
	return e
}
