// A line diff for the configuration page: Myers' O(ND) algorithm over the
// lines left after the common prefix and suffix, then hunks with three
// lines of context, as `diff -u` shows them. Bounded: more than
// MAX_LINES lines in all, or more than MAX_EDITS changed lines, is "too
// large" (the caller says so) rather than a frozen tab.

export const MAX_LINES = 4000;
export const MAX_EDITS = 2000;

export interface DiffLine {
  kind: " " | "+" | "-";
  text: string;
  /** 1-based line numbers in the old and new text (absent on the side the line is not in). */
  a?: number;
  b?: number;
}

export interface Hunk {
  header: string;
  lines: DiffLine[];
}

export type DiffResult = { tooLarge: true; reason: string } | { tooLarge: false; hunks: Hunk[]; added: number; removed: number };

export function splitLines(s: string): string[] {
  if (s === "") return [];
  const xs = s.split("\n");
  if (xs[xs.length - 1] === "") xs.pop();
  return xs;
}

/** diffLines compares two texts line by line. */
export function diffLines(oldText: string, newText: string, context = 3): DiffResult {
  const a = splitLines(oldText);
  const b = splitLines(newText);
  if (a.length + b.length > MAX_LINES) {
    return { tooLarge: true, reason: `${a.length + b.length} lines in all, more than ${MAX_LINES}` };
  }
  const script = editScript(a, b);
  if (!script) return { tooLarge: true, reason: `more than ${MAX_EDITS} lines differ` };
  let added = 0;
  let removed = 0;
  for (const l of script) {
    if (l.kind === "+") added++;
    else if (l.kind === "-") removed++;
  }
  return { tooLarge: false, hunks: hunks(script, context), added, removed };
}

/** editScript is the whole sequence of kept, added and removed lines, or null past MAX_EDITS. */
export function editScript(a: string[], b: string[]): DiffLine[] | null {
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
  const mid = myers(a.slice(pre, a.length - suf), b.slice(pre, b.length - suf));
  if (!mid) return null;
  const out: DiffLine[] = [];
  for (let i = 0; i < pre; i++) out.push({ kind: " ", text: a[i], a: i + 1, b: i + 1 });
  for (const l of mid) out.push({ kind: l.kind, text: l.text, a: l.a === undefined ? undefined : l.a + pre + 1, b: l.b === undefined ? undefined : l.b + pre + 1 });
  for (let i = 0; i < suf; i++) {
    const ia = a.length - suf + i;
    const ib = b.length - suf + i;
    out.push({ kind: " ", text: a[ia], a: ia + 1, b: ib + 1 });
  }
  return out;
}

// myers finds a shortest edit script. trace[d] is the furthest-reaching
// x of every diagonal k in [-d, d] before step d (index k + d), kept to
// walk back; its size is about D², which MAX_EDITS bounds.
function myers(a: string[], b: string[]): DiffLine[] | null {
  const n = a.length;
  const m = b.length;
  const max = n + m;
  if (max === 0) return [];
  const off = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  let found = -1;
  for (let d = 0; d <= max && d <= MAX_EDITS; d++) {
    trace.push(v.slice(off - d, off + d + 1));
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1] : v[off + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[off + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
    if (found >= 0) break;
  }
  if (found < 0) return null;
  const rev: DiffLine[] = [];
  let x = n;
  let y = m;
  for (let d = found; d > 0; d--) {
    const t = trace[d];
    const at = (k: number) => t[k + d];
    const k = x - y;
    const down = k === -d || (k !== d && at(k - 1) < at(k + 1));
    const pk = down ? k + 1 : k - 1;
    const px = at(pk);
    const py = px - pk;
    const sx = down ? px : px + 1; // where the snake of step d started
    while (x > sx) {
      rev.push({ kind: " ", text: a[x - 1], a: x - 1, b: y - 1 });
      x--;
      y--;
    }
    if (down) rev.push({ kind: "+", text: b[py], b: py });
    else rev.push({ kind: "-", text: a[px], a: px });
    x = px;
    y = py;
  }
  while (x > 0 && y > 0) {
    rev.push({ kind: " ", text: a[x - 1], a: x - 1, b: y - 1 });
    x--;
    y--;
  }
  // Indexes so far are 0-based within a and b; the caller shifts them.
  return rev.reverse();
}

/** hunks groups an edit script into hunks with `context` unchanged lines around each change. */
export function hunks(script: DiffLine[], context = 3): Hunk[] {
  const changed: number[] = [];
  script.forEach((l, i) => {
    if (l.kind !== " ") changed.push(i);
  });
  const out: Hunk[] = [];
  let i = 0;
  while (i < changed.length) {
    const start = Math.max(0, changed[i] - context);
    let end = Math.min(script.length, changed[i] + context + 1);
    i++;
    while (i < changed.length && changed[i] - context <= end) {
      end = Math.min(script.length, changed[i] + context + 1);
      i++;
    }
    const lines = script.slice(start, end);
    // Line numbers where the hunk starts on each side: the first line that
    // side has, or the line before it when the hunk has none there.
    let aStart = 0;
    let bStart = 0;
    for (let j = start; j >= 0; j--) {
      const l = script[j];
      if (l.a !== undefined && aStart === 0) aStart = j === start ? l.a : l.a + 1;
      if (l.b !== undefined && bStart === 0) bStart = j === start ? l.b : l.b + 1;
      if (aStart && bStart) break;
    }
    const aCount = lines.filter((l) => l.kind !== "+").length;
    const bCount = lines.filter((l) => l.kind !== "-").length;
    if (!aStart) aStart = aCount ? 1 : 0;
    if (!bStart) bStart = bCount ? 1 : 0;
    out.push({ header: `@@ -${aStart},${aCount} +${bStart},${bCount} @@`, lines });
  }
  return out;
}
