package history

import (
	"bytes"
	"strconv"
	"strings"
)

// diffContext is the number of unchanged lines shown around a change.
const diffContext = 3

// maxEditCost bounds the search for a shortest edit script in one region;
// past it the region is shown as replaced whole, so a diff of two large,
// unrelated texts stays cheap. The output is still an exact patch.
const maxEditCost = 4096

// Diff returns a unified diff turning a into b: "---"/"+++" headers naming
// nameA and nameB, "@@" hunks with 3 lines of context (hunks closer than
// 6 lines merge), and "\ No newline at end of file" after a last line
// without one. Equal texts give "". The edit script is a shortest one
// (Myers), except past maxEditCost edits in one region.
func Diff(a, b []byte, nameA, nameB string) string {
	if bytes.Equal(a, b) {
		return ""
	}
	la, lb := splitLines(a), splitLines(b)
	d := newDiffer(la, lb)
	d.compare(0, len(la), 0, len(lb))
	return d.unified(la, lb, nameA, nameB)
}

// splitLines cuts text after each "\n"; a last line without one is kept
// as it is, so "x" and "x\n" are different lines.
func splitLines(b []byte) []string {
	var out []string
	s := string(b)
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// differ marks the lines of a deleted and of b inserted; the unmarked
// lines of a and b, in order, are the common subsequence.
type differ struct {
	a, b   []int // lines as interned numbers
	delA   []bool
	insB   []bool
	vf, vb []int // furthest x per diagonal, forward and backward
}

func newDiffer(la, lb []string) *differ {
	ids := map[string]int{}
	intern := func(ls []string) []int {
		out := make([]int, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	n := 2*min((len(la)+len(lb)+1)/2, maxEditCost) + 3
	return &differ{
		a: intern(la), b: intern(lb),
		delA: make([]bool, len(la)), insB: make([]bool, len(lb)),
		vf: make([]int, n), vb: make([]int, n),
	}
}

// compare diffs a[aLo:aHi] against b[bLo:bHi] by splitting at a middle
// snake (Myers 1986, linear space). Each split halves the edit cost, so
// the recursion is about log2(cost) deep.
func (d *differ) compare(aLo, aHi, bLo, bHi int) {
	for aLo < aHi && bLo < bHi && d.a[aLo] == d.b[bLo] {
		aLo, bLo = aLo+1, bLo+1
	}
	for aLo < aHi && bLo < bHi && d.a[aHi-1] == d.b[bHi-1] {
		aHi, bHi = aHi-1, bHi-1
	}
	if aLo == aHi || bLo == bHi {
		d.replace(aLo, aHi, bLo, bHi)
		return
	}
	xs, ys, xe, ye, ok := d.middleSnake(aLo, aHi, bLo, bHi)
	if !ok {
		d.replace(aLo, aHi, bLo, bHi)
		return
	}
	d.compare(aLo, xs, bLo, ys)
	d.compare(xe, aHi, ye, bHi)
}

func (d *differ) replace(aLo, aHi, bLo, bHi int) {
	for i := aLo; i < aHi; i++ {
		d.delA[i] = true
	}
	for j := bLo; j < bHi; j++ {
		d.insB[j] = true
	}
}

// middleSnake finds the diagonal run in the middle of a shortest edit
// path from (aLo,bLo) to (aHi,bHi), searching from both ends at once;
// both regions are non-empty and differ at their first and last lines.
// It returns the run's start and end, or false past maxEditCost edits.
//
// Coordinates are relative to the region; diagonal k holds the points
// with x-y == k. The backward search runs on the reversed texts, so its
// diagonal k is the forward diagonal delta-k. Only points inside the
// region are recorded; -1 marks a diagonal with none.
func (d *differ) middleSnake(aLo, aHi, bLo, bHi int) (xs, ys, xe, ye int, ok bool) {
	a, b := d.a[aLo:aHi], d.b[bLo:bHi]
	n, m := len(a), len(b)
	maxD := min((n+m+1)/2, maxEditCost)
	off := maxD + 1
	vf, vb := d.vf[:2*maxD+3], d.vb[:2*maxD+3]
	for i := range vf {
		vf[i], vb[i] = -1, -1
	}
	delta := n - m
	odd := delta&1 != 0
	// step extends the furthest D-paths from the (D-1)-paths in v; eq
	// compares the x-th line of a with the y-th of b in its direction.
	step := func(v []int, dd, k int, eq func(x, y int) bool) (x0, x int) {
		x = -1
		if dd == 0 {
			x = 0
		}
		if k+1 <= dd-1 && v[off+k+1] >= 0 && v[off+k+1]-k <= m { // down from k+1
			x = v[off+k+1]
		}
		if k-1 >= -(dd-1) && v[off+k-1] >= 0 && v[off+k-1]+1 <= n && v[off+k-1]+1 > x { // right from k-1
			x = v[off+k-1] + 1
		}
		if x < 0 {
			return -1, -1
		}
		x0 = x
		for x < n && x-k < m && eq(x, x-k) {
			x++
		}
		return x0, x
	}
	fwd := func(x, y int) bool { return a[x] == b[y] }
	bwd := func(x, y int) bool { return a[n-1-x] == b[m-1-y] }
	for dd := 0; dd <= maxD; dd++ {
		for k := -dd; k <= dd; k += 2 {
			x0, x := step(vf, dd, k, fwd)
			vf[off+k] = x
			if x < 0 || !odd {
				continue
			}
			if kr := delta - k; kr >= -(dd-1) && kr <= dd-1 && vb[off+kr] >= 0 && x+vb[off+kr] >= n {
				return aLo + x0, bLo + x0 - k, aLo + x, bLo + x - k, true
			}
		}
		for k := -dd; k <= dd; k += 2 {
			x0, x := step(vb, dd, k, bwd)
			vb[off+k] = x
			if x < 0 || odd {
				continue
			}
			if kf := delta - k; kf >= -dd && kf <= dd && vf[off+kf] >= 0 && x+vf[off+kf] >= n {
				return aLo + n - x, bLo + m - (x - k), aLo + n - x0, bLo + m - (x0 - k), true
			}
		}
	}
	return 0, 0, 0, 0, false
}

// op is one line of the edit script: ' ', '-' or '+', with the line's
// index in a (for ' ' and '-') or b (for '+').
type op struct {
	kind byte
	i, j int // position in a and b before this line
}

func (d *differ) script() []op {
	var ops []op
	i, j := 0, 0
	for i < len(d.delA) || j < len(d.insB) {
		switch {
		case i < len(d.delA) && d.delA[i]:
			ops = append(ops, op{'-', i, j})
			i++
		case j < len(d.insB) && d.insB[j]:
			ops = append(ops, op{'+', i, j})
			j++
		default:
			ops = append(ops, op{' ', i, j})
			i, j = i+1, j+1
		}
	}
	return ops
}

func (d *differ) unified(la, lb []string, nameA, nameB string) string {
	ops := d.script()
	var sb strings.Builder
	sb.WriteString("--- " + nameA + "\n+++ " + nameB + "\n")
	for start := 0; start < len(ops); {
		for start < len(ops) && ops[start].kind == ' ' {
			start++
		}
		if start == len(ops) {
			break
		}
		// Extend the hunk over changes separated by at most 2*context
		// unchanged lines.
		end := start
		for k := start; k < len(ops); k++ {
			if ops[k].kind != ' ' {
				end = k + 1
				continue
			}
			if k-end >= 2*diffContext {
				break
			}
		}
		lo := max(start-diffContext, 0)
		hi := min(end+diffContext, len(ops))
		var na, nb int
		for _, o := range ops[lo:hi] {
			if o.kind != '+' {
				na++
			}
			if o.kind != '-' {
				nb++
			}
		}
		sb.WriteString("@@ -" + hunkRange(ops[lo].i, na) + " +" + hunkRange(ops[lo].j, nb) + " @@\n")
		for _, o := range ops[lo:hi] {
			var line string
			if o.kind == '+' {
				line = lb[o.j]
			} else {
				line = la[o.i]
			}
			sb.WriteByte(o.kind)
			sb.WriteString(line)
			if !strings.HasSuffix(line, "\n") {
				sb.WriteString("\n\\ No newline at end of file\n")
			}
		}
		start = hi
	}
	return sb.String()
}

// hunkRange formats a hunk side as GNU diff does: "l" for one line,
// "l,n" otherwise, and for no lines the number of the line before.
func hunkRange(before, n int) string {
	switch n {
	case 0:
		return strconv.Itoa(before) + ",0"
	case 1:
		return strconv.Itoa(before + 1)
	}
	return strconv.Itoa(before+1) + "," + strconv.Itoa(n)
}
