package history_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/node/history"
)

func TestDiff(t *testing.T) {
	lines := func(from, to int) string {
		var sb strings.Builder
		for i := from; i <= to; i++ {
			sb.WriteString("l" + strconv.Itoa(i) + "\n")
		}
		return sb.String()
	}
	tests := []struct {
		name string
		a, b string
		want string
	}{
		{name: "equal", a: "x\ny\n", b: "x\ny\n", want: ""},
		{name: "both empty", a: "", b: "", want: ""},
		{
			name: "add to empty", a: "", b: "x\ny\n",
			want: "--- A\n+++ B\n@@ -0,0 +1,2 @@\n+x\n+y\n",
		},
		{
			name: "delete all", a: "x\n", b: "",
			want: "--- A\n+++ B\n@@ -1 +0,0 @@\n-x\n",
		},
		{
			name: "add in the middle", a: lines(1, 8), b: lines(1, 4) + "new\n" + lines(5, 8),
			want: "--- A\n+++ B\n@@ -2,6 +2,7 @@\n l2\n l3\n l4\n+new\n l5\n l6\n l7\n",
		},
		{
			name: "delete at the start", a: lines(1, 6), b: lines(2, 6),
			want: "--- A\n+++ B\n@@ -1,4 +1,3 @@\n-l1\n l2\n l3\n l4\n",
		},
		{
			name: "change at the end", a: lines(1, 5), b: lines(1, 4) + "five\n",
			want: "--- A\n+++ B\n@@ -2,4 +2,4 @@\n l2\n l3\n l4\n-l5\n+five\n",
		},
		{
			name: "nearby changes share a hunk", a: lines(1, 12),
			b:    strings.Replace(strings.Replace(lines(1, 12), "l3\n", "three\n", 1), "l9\n", "nine\n", 1),
			want: "--- A\n+++ B\n@@ -1,12 +1,12 @@\n l1\n l2\n-l3\n+three\n l4\n l5\n l6\n l7\n l8\n-l9\n+nine\n l10\n l11\n l12\n",
		},
		{
			name: "distant changes get two hunks", a: lines(1, 13),
			b:    strings.Replace(strings.Replace(lines(1, 13), "l2\n", "two\n", 1), "l10\n", "ten\n", 1),
			want: "--- A\n+++ B\n@@ -1,5 +1,5 @@\n l1\n-l2\n+two\n l3\n l4\n l5\n@@ -7,7 +7,7 @@\n l7\n l8\n l9\n-l10\n+ten\n l11\n l12\n l13\n",
		},
		{
			name: "no newline at end of both", a: "x\ny", b: "x\nz",
			want: "--- A\n+++ B\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+z\n\\ No newline at end of file\n",
		},
		{
			name: "newline added at end", a: "x\ny", b: "x\ny\n",
			want: "--- A\n+++ B\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+y\n",
		},
		{
			name: "keeps secret references verbatim", a: "token: ${env:A}\n", b: "token: ${secret:b}\n",
			want: "--- A\n+++ B\n@@ -1 +1 @@\n-token: ${env:A}\n+token: ${secret:b}\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := history.Diff([]byte(tt.a), []byte(tt.b), "A", "B")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Diff mismatch (-want +got):\n%s\ngot:\n%s", diff, got)
			}
			checkPatch(t, tt.a, tt.b, got)
		})
	}
}

// TestDiffShortest checks that the edit script has as few +/- lines as
// the longest common subsequence allows.
func TestDiffShortest(t *testing.T) {
	tests := []struct{ a, b string }{
		{"a\nb\nc\na\nb\nb\na\n", "c\nb\na\nb\na\nc\n"},
		{"x\na\nx\nb\nx\n", "a\nx\nb\nx\nx\n"},
		{"1\n2\n3\n4\n5\n", "5\n4\n3\n2\n1\n"},
	}
	for i, tt := range tests {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			d := history.Diff([]byte(tt.a), []byte(tt.b), "a", "b")
			checkPatch(t, tt.a, tt.b, d)
			checkShortest(t, tt.a, tt.b, d)
		})
	}
}

// TestDiffLargeUnrelated exercises the cost bound: two unrelated texts
// past maxEditCost still give an exact patch.
func TestDiffLargeUnrelated(t *testing.T) {
	var a, b strings.Builder
	for i := range 6000 {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
		if i%97 == 0 {
			a.WriteString("common\n")
			b.WriteString("common\n")
		}
	}
	d := history.Diff([]byte(a.String()), []byte(b.String()), "a", "b")
	checkPatch(t, a.String(), b.String(), d)
}

func FuzzDiff(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nc\nd\n")
	f.Add("", "x")
	f.Add("x\ny", "x\ny\n")
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "1\n2\nX\n4\n5\n6\n7\n8\nY\n10\n")
	f.Add("a\na\na\nb\n", "b\na\na\na\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := history.Diff([]byte(a), []byte(b), "a", "b")
		if (a == b) != (d == "") {
			t.Fatalf("a==b is %v but diff is %q", a == b, d)
		}
		checkPatch(t, a, b, d)
		if strings.Count(a, "\n")+strings.Count(b, "\n") < 200 {
			checkShortest(t, a, b, d)
		}
	})
}

// checkPatch applies the unified diff d to a and requires b.
func checkPatch(t *testing.T, a, b, d string) {
	t.Helper()
	got, err := applyPatch(a, d)
	if err != nil {
		t.Fatalf("patch does not apply: %v\ndiff:\n%s", err, d)
	}
	if got != b {
		t.Fatalf("patched text = %q, want %q\ndiff:\n%s", got, b, d)
	}
}

// applyPatch is a strict unified-diff applier: hunk ranges must match
// their lines, context and deletions must match a, and every line of a
// outside the hunks is copied.
func applyPatch(a, d string) (string, error) {
	if d == "" {
		return a, nil
	}
	src := splitKeep(a)
	lines := strings.SplitAfter(d, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		return "", fmt.Errorf("bad headers %q", lines[:min(2, len(lines))])
	}
	if lines[len(lines)-1] != "" {
		return "", fmt.Errorf("diff does not end with a newline")
	}
	lines = lines[2 : len(lines)-1]
	var out []string
	pos := 0 // next line of src to copy
	for len(lines) > 0 {
		var as, an, bs, bn int
		if err := parseHunk(lines[0], &as, &an, &bs, &bn); err != nil {
			return "", err
		}
		lines = lines[1:]
		start := as - 1
		if an == 0 {
			start = as
		}
		if start < pos || start > len(src) {
			return "", fmt.Errorf("hunk at %d overlaps or is out of range (pos %d)", as, pos)
		}
		out = append(out, src[pos:start]...)
		pos = start
		gotA, gotB := 0, 0
		for len(lines) > 0 && !strings.HasPrefix(lines[0], "@@ ") {
			l := lines[0]
			lines = lines[1:]
			if l == "" {
				return "", fmt.Errorf("empty line in hunk")
			}
			text := l[1:]
			if len(lines) > 0 && lines[0] == "\\ No newline at end of file\n" {
				text = strings.TrimSuffix(text, "\n")
				lines = lines[1:]
			}
			switch l[0] {
			case ' ', '-':
				if pos >= len(src) || src[pos] != text {
					return "", fmt.Errorf("line %d: have %q, hunk says %q", pos+1, at(src, pos), text)
				}
				pos++
				gotA++
				if l[0] == ' ' {
					out = append(out, text)
					gotB++
				}
			case '+':
				out = append(out, text)
				gotB++
			default:
				return "", fmt.Errorf("bad hunk line %q", l)
			}
		}
		if gotA != an || gotB != bn {
			return "", fmt.Errorf("hunk -%d,%d +%d,%d holds %d and %d lines", as, an, bs, bn, gotA, gotB)
		}
	}
	out = append(out, src[pos:]...)
	return strings.Join(out, ""), nil
}

func at(src []string, i int) string {
	if i < len(src) {
		return src[i]
	}
	return "<end>"
}

func parseHunk(h string, as, an, bs, bn *int) error {
	var ra, rb string
	if _, err := fmt.Sscanf(h, "@@ -%s +%s @@\n", &ra, &rb); err != nil {
		return fmt.Errorf("bad hunk header %q: %v", h, err)
	}
	parse := func(r string, s, n *int) error {
		x, y, ok := strings.Cut(r, ",")
		var err error
		if *s, err = strconv.Atoi(x); err != nil {
			return fmt.Errorf("bad range %q", r)
		}
		*n = 1
		if ok {
			if *n, err = strconv.Atoi(y); err != nil || *n == 1 {
				return fmt.Errorf("bad range %q", r)
			}
		}
		return nil
	}
	if err := parse(ra, as, an); err != nil {
		return err
	}
	return parse(rb, bs, bn)
}

func splitKeep(s string) []string {
	if s == "" {
		return nil
	}
	out := strings.SplitAfter(s, "\n")
	if out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// checkShortest requires the diff's +/- line count to be len(a)+len(b)
// minus twice their longest common subsequence.
func checkShortest(t *testing.T, a, b, d string) {
	t.Helper()
	la, lb := splitKeep(a), splitKeep(b)
	lcs := make([][]int, len(la)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(lb)+1)
	}
	for i := len(la) - 1; i >= 0; i-- {
		for j := len(lb) - 1; j >= 0; j-- {
			if la[i] == lb[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	want := len(la) + len(lb) - 2*lcs[0][0]
	got := 0
	for i, l := range strings.SplitAfter(d, "\n") {
		if i >= 2 && (strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-")) {
			got++
		}
	}
	if got != want {
		t.Fatalf("diff has %d changed lines, the shortest has %d\ndiff:\n%s", got, want, d)
	}
}

func BenchmarkDiff(b *testing.B) {
	var small, edited, other strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&small, "line %d\n", i)
		if i%200 == 0 {
			fmt.Fprintf(&edited, "changed %d\n", i)
		} else {
			fmt.Fprintf(&edited, "line %d\n", i)
		}
		fmt.Fprintf(&other, "other %d\n", i)
	}
	for _, bc := range []struct{ name, a, b string }{
		{"2000 lines 10 edits", small.String(), edited.String()},
		{"2000 lines unrelated", small.String(), other.String()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				history.Diff([]byte(bc.a), []byte(bc.b), "a", "b")
			}
		})
	}
}
