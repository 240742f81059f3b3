package component

import (
	"bytes"
	"fmt"
	"slices"
)

// ArkFlowRow maps one of ArkFlow's components to flowplane's, for the
// compatibility table at the top of docs/components.md.
type ArkFlowRow struct {
	Kind      Kind
	ArkFlow   string // ArkFlow's type name
	Flowplane string // flowplane's type name of the same kind; empty when there is none
	Notes     string // where fields or behaviour differ
}

// SetArkFlow sets the compatibility table. Rows are kept in the order
// given.
func (r *Registry) SetArkFlow(rows []ArkFlowRow) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arkflow = slices.Clone(rows)
}

// ArkFlow returns the compatibility table.
func (r *Registry) ArkFlow() []ArkFlowRow {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.arkflow)
}

// arkflowMarkdown renders the compatibility table.
func (r *Registry) arkflowMarkdown(b *bytes.Buffer) {
	rows := r.ArkFlow()
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n## ArkFlow compatibility\n\n")
	b.WriteString("flowplane reads ArkFlow's configuration format. Each of ArkFlow's components, ")
	b.WriteString("the flowplane component an ArkFlow configuration gets for it, and where the two differ; ")
	b.WriteString("[arkflow.md](arkflow.md) measures the result on ArkFlow's example configurations.\n\n")
	b.WriteString("| kind | ArkFlow | flowplane | differences |\n|---|---|---|---|\n")
	anchors := r.anchors()
	for _, row := range rows {
		fp := "—"
		if a, ok := anchors[row.Kind][row.Flowplane]; ok {
			fp = fmt.Sprintf("[`%s`](#%s)", row.Flowplane, a)
		}
		fmt.Fprintf(b, "| %s | `%s` | %s | %s |\n", row.Kind, row.ArkFlow, fp, cell(row.Notes))
	}
}

// anchors returns the heading anchor of each component's section as
// GitHub makes them: the name, then name-1, name-2 for later headings of
// the same text (kafka input, kafka output).
func (r *Registry) anchors() map[Kind]map[string]string {
	seen := map[string]int{}
	out := map[Kind]map[string]string{}
	for _, k := range Kinds {
		out[k] = map[string]string{}
		for _, n := range r.Names(k) {
			a := n
			if c := seen[n]; c > 0 {
				a = fmt.Sprintf("%s-%d", n, c)
			}
			seen[n]++
			out[k][n] = a
		}
	}
	return out
}
