package node

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/node/history"
)

// DiffReport compares two configuration texts.
type DiffReport struct {
	From    string        `json:"from"`
	To      string        `json:"to"`
	Unified string        `json:"unified"`
	Summary StreamSummary `json:"summary"`
}

// StreamSummary lists stream ids by what a change does to them.
type StreamSummary struct {
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	Changed   []string `json:"changed"`
	Unchanged []string `json:"unchanged"`
}

// Diff compares two versions, "draft" naming the draft; empty from means
// the applied version and empty to the draft.
func (n *Node) Diff(from, to string) (DiffReport, error) {
	h, err := n.history()
	if err != nil {
		return DiffReport{}, err
	}
	load := func(id string) (Document, string, error) {
		if id == "draft" {
			d, ok := h.Draft()
			if !ok {
				return Document{}, "", fmt.Errorf("%w: no draft saved", ErrVersionNotFound)
			}
			return Document{Format: d.Format, Content: d.Content}, "draft", nil
		}
		var v history.Version
		var err error
		if id == "" {
			v, err = h.Applied()
		} else {
			v, err = h.Get(id)
		}
		if errors.Is(err, history.ErrNotFound) {
			return Document{}, "", fmt.Errorf("%w: %q", ErrVersionNotFound, id)
		}
		if err != nil {
			return Document{}, "", err
		}
		return Document{Format: v.Format, Content: v.Content}, v.ID, nil
	}
	if to == "" {
		to = "draft"
	}
	a, aName, err := load(from)
	if err != nil {
		return DiffReport{}, err
	}
	b, bName, err := load(to)
	if err != nil {
		return DiffReport{}, err
	}
	// The diff compares masked texts: a literal credential's value never
	// shows, nor does a change of it (the summary still counts the stream
	// as changed).
	return DiffReport{
		From: aName, To: bName,
		Unified: history.Diff(n.masked.mask(a.Content, a.Format), n.masked.mask(b.Content, b.Format), aName, bName),
		Summary: summarize(a, b),
	}, nil
}

// summarize compares the streams of two documents by id, on their text as
// written (a draft need not be valid, and references stay unresolved).
func summarize(a, b Document) StreamSummary {
	sa, sb := streamTrees(a), streamTrees(b)
	s := StreamSummary{Added: []string{}, Removed: []string{}, Changed: []string{}, Unchanged: []string{}}
	for id, tb := range sb {
		ta, ok := sa[id]
		switch {
		case !ok:
			s.Added = append(s.Added, id)
		case reflect.DeepEqual(ta, tb):
			s.Unchanged = append(s.Unchanged, id)
		default:
			s.Changed = append(s.Changed, id)
		}
	}
	for id := range sa {
		if _, ok := sb[id]; !ok {
			s.Removed = append(s.Removed, id)
		}
	}
	for _, l := range [][]string{s.Added, s.Removed, s.Changed, s.Unchanged} {
		slices.Sort(l)
	}
	return s
}

func streamTrees(d Document) map[string]any {
	out := map[string]any{}
	tree, err := config.Tree(d.Content, d.Format)
	if err != nil {
		return out
	}
	m, _ := tree.(map[string]any)
	list, _ := m["streams"].([]any)
	for i, s := range list {
		id := fmt.Sprintf("stream-%d", i)
		if sm, ok := s.(map[string]any); ok {
			if v, ok := sm["id"].(string); ok && v != "" {
				id = v
			}
		}
		out[id] = s
	}
	return out
}
