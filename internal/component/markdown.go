package component

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Markdown renders the registry as a reference page: per kind, each
// component's summary, a table of its fields and its example.
func (r *Registry) Markdown() []byte {
	var b bytes.Buffer
	b.WriteString("# Components\n\n<!-- Generated from the component registry by `go test ./internal/connect/all -update`; do not edit. -->\n\n")
	b.WriteString("Every component is an object selected by `type`; its fields sit beside `type`.\n")
	r.arkflowMarkdown(&b)
	for _, k := range Kinds {
		names := r.Names(k)
		if len(names) == 0 {
			continue
		}
		heading := titleCase(string(k)) + "s"
		if k == KindTemporary {
			heading = "Temporary tables (a stream's `temporary` list, each with a `name`)"
		}
		fmt.Fprintf(&b, "\n## %s\n", heading)
		for _, n := range names {
			s, _ := r.Lookup(k, n)
			fmt.Fprintf(&b, "\n### `%s`\n\n%s\n", n, s.Summary)
			props, _ := s.Schema["properties"].(map[string]any)
			if len(props) > 0 {
				req := map[string]bool{}
				if rs, ok := s.Schema["required"].([]any); ok {
					for _, x := range rs {
						req[fmt.Sprint(x)] = true
					}
				}
				if rs, ok := s.Schema["required"].([]string); ok {
					for _, x := range rs {
						req[x] = true
					}
				}
				b.WriteString("\n| field | type | default | description |\n|---|---|---|---|\n")
				fields := make([]string, 0, len(props))
				for f := range props {
					fields = append(fields, f)
				}
				slices.Sort(fields)
				for _, f := range fields {
					p, _ := props[f].(map[string]any)
					def := "—"
					if req[f] {
						def = "required"
					} else if d, ok := p["default"]; ok {
						j, _ := json.Marshal(d)
						def = "`" + string(j) + "`"
					}
					fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f, typeOf(p), def, cell(fmt.Sprint(p["description"])))
				}
			}
			fmt.Fprintf(&b, "\n```yaml\n%s\n```\n", strings.TrimRight(s.Example, "\n"))
		}
	}
	return b.Bytes()
}

func typeOf(p map[string]any) string {
	switch t := p["type"].(type) {
	case string:
		if e, ok := p["enum"].([]any); ok {
			var vs []string
			for _, v := range e {
				vs = append(vs, fmt.Sprintf("`%v`", v))
			}
			return strings.Join(vs, " \\| ")
		}
		if e, ok := p["enum"].([]string); ok {
			return "`" + strings.Join(e, "` \\| `") + "`"
		}
		return t
	case []any:
		var vs []string
		for _, v := range t {
			vs = append(vs, fmt.Sprint(v))
		}
		return strings.Join(vs, " \\| ")
	case []string:
		return strings.Join(t, " \\| ")
	}
	return "any"
}

func cell(s string) string {
	if s == "<nil>" {
		return ""
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ")
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
