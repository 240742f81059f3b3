package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/flowplane/flowplane/internal/wire"
)

// Output formats.
const (
	outTable = ""
	outWide  = "wide"
	outJSON  = "json"
	outYAML  = "yaml"
)

// checkOutput refuses an unknown -o.
func checkOutput(o string, allowWide bool) error {
	switch o {
	case outTable, outJSON, outYAML:
		return nil
	case outWide:
		if allowWide {
			return nil
		}
	}
	if allowWide {
		return usagef("-o %q: want wide, json or yaml", o)
	}
	return usagef("-o %q: want json or yaml", o)
}

// table is rows under a header; wide columns show only with -o wide.
type table struct {
	header []string
	wide   []string
	rows   [][]string // each row: len(header) cells, then len(wide)
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// render writes the table aligned; wide adds the wide columns.
func (t *table) render(w io.Writer, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	n := len(t.header)
	head := t.header
	if wide {
		head = append(append([]string{}, t.header...), t.wide...)
		n += len(t.wide)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range t.rows {
		cells := make([]string, n)
		for i := range cells {
			if i < len(r) && r[i] != "" {
				cells[i] = clean(r[i])
			} else {
				cells[i] = "-"
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// clean keeps a cell on one line and bounded.
func clean(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 80 {
		s = string(r[:79]) + "…"
	}
	return s
}

// encode writes v as indented JSON or as YAML (with the JSON field names).
func encode(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == outJSON {
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return err
	}
	y, err := yaml.Marshal(tree)
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}

// age is how long ago t was, coarsely ("-" for none).
func age(t wire.Time, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t.Time)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func itoa(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

func failureText(f *wire.Failure) string {
	if f == nil {
		return ""
	}
	return joinNonEmpty(f.Code, f.Message)
}
