// A job's dataflow drawn in SVG from its plan explanation (docs/jobs.md
// "The plan explanation"): each chain (one task per subtask) is a group
// holding its operators left to right, chains are placed in layers by
// longest path from the sources, and the edges between chains are drawn
// with their mode: partitioned edges dashed and labelled with their key,
// rebalance and late edges labelled too. No library: a layered layout is
// enough for the graphs a job has.

export interface PlanRange {
  start: number;
  end: number;
}

export interface PlanChain {
  id: string;
  operators: string[];
  parallelism: number;
  tasks: { id: string; subtask: number; key_groups?: PlanRange }[];
}

export interface PlanEdge {
  id: string;
  from: string;
  to: string;
  mode: string; // partitioned, forward, rebalance, late
  chained: boolean;
  key?: string;
  routes?: { subtask: number; key_groups: PlanRange }[];
}

export interface PlanStateful {
  id: string;
  kind: string;
  key?: string;
  window?: { type: string; size_ms?: number; slide_ms?: number; gap_ms?: number };
}

export interface Plan {
  job_id: string;
  version: number;
  format_version: number;
  max_parallelism: number;
  chains: PlanChain[];
  edges: PlanEdge[];
  stateful_operators?: PlanStateful[];
  time?: Record<string, unknown>[];
  state?: Record<string, unknown>;
  checkpoint?: { interval_ms?: number; retention?: number; object_store_uri?: string };
  recovery?: string;
}

const OP_H = 46;
const OP_GAP = 26;
const PAD = 10;
const HEAD = 20;
const COL_GAP = 150;
const ROW_GAP = 34;

interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

function opWidth(id: string, sub: string): number {
  return Math.max(96, 7 * Math.max(id.length, sub.length) + 20);
}

function windowText(w: PlanStateful["window"]): string {
  if (!w) return "";
  const s = (ms?: number) => (ms === undefined ? "" : ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`);
  if (w.type === "sliding") return `sliding ${s(w.size_ms)}/${s(w.slide_ms)}`;
  if (w.type === "session") return `session gap ${s(w.gap_ms)}`;
  return `${w.type} ${s(w.size_ms)}`;
}

/** edgeLabel is what an edge between tasks says about its partitioning. */
export function edgeLabel(e: PlanEdge): string {
  if (e.mode === "partitioned") return `hash(${e.key ?? "key"})`;
  return e.mode;
}

/**
 * layout places every chain: layer = longest path from a chain without
 * inputs, over the edges between chains; within a layer, chains follow
 * the mean row of their inputs, to keep edges short and few crossings.
 */
function layout(plan: Plan, kinds: Record<string, string>) {
  const chainOf = new Map<string, string>();
  for (const c of plan.chains) for (const o of c.operators) chainOf.set(o, c.id);
  const between = plan.edges.filter((e) => !e.chained && chainOf.get(e.from) !== chainOf.get(e.to));
  const preds = new Map<string, Set<string>>(plan.chains.map((c) => [c.id, new Set()]));
  for (const e of between) {
    const a = chainOf.get(e.from);
    const b = chainOf.get(e.to);
    if (a && b) preds.get(b)?.add(a);
  }
  const layer = new Map<string, number>();
  const visiting = new Set<string>();
  const depth = (c: string): number => {
    const known = layer.get(c);
    if (known !== undefined) return known;
    if (visiting.has(c)) return 0; // a cycle: the plan forbids them, draw anyway
    visiting.add(c);
    let d = 0;
    for (const p of preds.get(c) ?? []) d = Math.max(d, depth(p) + 1);
    visiting.delete(c);
    layer.set(c, d);
    return d;
  };
  for (const c of plan.chains) depth(c.id);

  const stateful = new Map((plan.stateful_operators ?? []).map((s) => [s.id, s]));
  const subOf = (op: string) => {
    const s = stateful.get(op);
    const k = kinds[op] ?? s?.kind ?? "";
    return s?.window ? windowText(s.window) : k;
  };
  const size = new Map<string, { w: number; h: number }>();
  for (const c of plan.chains) {
    const w = c.operators.reduce((a, o) => a + opWidth(o, subOf(o)), 0) + OP_GAP * (c.operators.length - 1) + 2 * PAD;
    size.set(c.id, { w: Math.max(w, 7 * (c.id.length + 14) + 2 * PAD), h: HEAD + OP_H + 2 * PAD });
  }
  const layers: string[][] = [];
  for (const c of plan.chains) {
    const l = layer.get(c.id) ?? 0;
    (layers[l] ??= []).push(c.id);
  }
  const row = new Map<string, number>();
  layers.forEach((ids, l) => {
    if (l > 0) {
      const bary = (id: string) => {
        const ps = [...(preds.get(id) ?? [])].map((p) => row.get(p) ?? 0);
        return ps.length ? ps.reduce((a, b) => a + b, 0) / ps.length : 0;
      };
      ids.sort((a, b) => bary(a) - bary(b));
    }
    ids.forEach((id, i) => row.set(id, i));
  });
  const colW = layers.map((ids) => Math.max(0, ...ids.map((id) => size.get(id)!.w)));
  const colH = layers.map((ids) => ids.reduce((a, id) => a + size.get(id)!.h, 0) + ROW_GAP * (ids.length - 1));
  const height = Math.max(0, ...colH) + 2 * PAD;
  const chains = new Map<string, Box>();
  const ops = new Map<string, Box>();
  let x = PAD;
  layers.forEach((ids, l) => {
    let y = PAD + (height - 2 * PAD - colH[l]) / 2;
    for (const id of ids) {
      const s = size.get(id)!;
      const cx = x + (colW[l] - s.w) / 2;
      chains.set(id, { x: cx, y, w: s.w, h: s.h });
      let ox = cx + PAD;
      for (const o of plan.chains.find((c) => c.id === id)!.operators) {
        const w = opWidth(o, subOf(o));
        ops.set(o, { x: ox, y: y + HEAD + PAD, w, h: OP_H });
        ox += w + OP_GAP;
      }
      y += s.h + ROW_GAP;
    }
    x += colW[l] + COL_GAP;
  });
  const width = Math.max(x - COL_GAP + PAD, 2 * PAD);
  return { chains, ops, between, width, height, subOf, stateful };
}

/** Dag draws the plan; kinds (operator id -> kind) come from the spec when known. */
export function Dag(props: { plan: Plan; kinds?: Record<string, string> }) {
  const { plan } = props;
  const L = layout(plan, props.kinds ?? {});
  const chained = plan.edges.filter((e) => e.chained);
  const desc =
    `Dataflow of ${plan.job_id} version ${plan.version}: ${plan.chains.length} tasks (chains), ` +
    L.between.map((e) => `${e.from} to ${e.to} (${edgeLabel(e)})`).join(", ");
  return (
    <figure class="dag" data-dag={plan.job_id}>
      <svg viewBox={`0 0 ${L.width} ${L.height}`} width={L.width} height={L.height} role="img" aria-label={desc}>
        <defs>
          <marker id="dag-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
            <path class="arrow" d="M0,0 L10,5 L0,10 z" />
          </marker>
          <marker id="dag-arrow-p" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
            <path class="arrow partitioned" d="M0,0 L10,5 L0,10 z" />
          </marker>
        </defs>
        {plan.chains.map((c) => {
          const b = L.chains.get(c.id)!;
          return (
            <g key={c.id} class="chain" data-chain={c.id} data-parallelism={c.parallelism}>
              <title>{`task ${c.id}: ${c.operators.join(" → ")}, parallelism ${c.parallelism} (${c.tasks.map((t) => t.id).join(", ")})`}</title>
              <rect x={b.x} y={b.y} width={b.w} height={b.h} rx="8" />
              <text class="chain-label" x={b.x + PAD} y={b.y + 15}>
                {c.id}
              </text>
              <text class="chain-par" x={b.x + b.w - PAD} y={b.y + 15} text-anchor="end">
                {`×${c.parallelism}`}
              </text>
            </g>
          );
        })}
        {chained.map((e) => {
          const a = L.ops.get(e.from);
          const b = L.ops.get(e.to);
          if (!a || !b) return null;
          return (
            <path
              key={e.id}
              class="edge chained"
              data-edge={e.id}
              data-mode={e.mode}
              d={`M${a.x + a.w},${a.y + a.h / 2} L${b.x},${b.y + b.h / 2}`}
              marker-end="url(#dag-arrow)"
            />
          );
        })}
        {L.between.map((e) => {
          const a = L.ops.get(e.from);
          const b = L.ops.get(e.to);
          if (!a || !b) return null;
          const x1 = a.x + a.w;
          const y1 = a.y + a.h / 2;
          const x2 = b.x;
          const y2 = b.y + b.h / 2;
          const dx = Math.max(40, (x2 - x1) / 2);
          const part = e.mode === "partitioned";
          const cls = "edge " + e.mode + (part ? " partitioned" : "");
          const label = edgeLabel(e);
          const lx = (x1 + x2) / 2;
          const ly = (y1 + y2) / 2 - 6;
          return (
            <g key={e.id} class="edge-group" data-edge={e.id} data-mode={e.mode}>
              <title>{`${e.id}: ${e.mode}${e.key ? " by " + e.key : ""}${e.routes ? ", " + e.routes.length + " downstream subtasks by key-group range" : ""}`}</title>
              <path class={cls} d={`M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`} marker-end={part ? "url(#dag-arrow-p)" : "url(#dag-arrow)"} />
              {e.mode !== "forward" ? (
                <text class={"edge-label" + (part ? " partitioned" : "")} x={lx} y={ly} text-anchor="middle">
                  {label}
                </text>
              ) : null}
            </g>
          );
        })}
        {plan.chains.flatMap((c) =>
          c.operators.map((o) => {
            const b = L.ops.get(o)!;
            const s = L.stateful.get(o);
            return (
              <g key={o} class={"node" + (s ? " stateful" : "")} data-operator={o} data-stateful={s ? "true" : undefined}>
                <title>{`${o}${props.kinds?.[o] ? " (" + props.kinds[o] + ")" : ""}${s ? ", keyed state by " + (s.key ?? "key") : ""}, parallelism ${c.parallelism}`}</title>
                <rect x={b.x} y={b.y} width={b.w} height={b.h} rx="5" />
                <text x={b.x + 8} y={b.y + 18}>
                  {o}
                </text>
                <text class="sub" x={b.x + 8} y={b.y + 35}>
                  {L.subOf(o)}
                </text>
                {s ? (
                  <text class="state-mark" x={b.x + b.w - 7} y={b.y + 18} text-anchor="end">
                    ◆
                  </text>
                ) : null}
              </g>
            );
          }),
        )}
      </svg>
      <figcaption class="legend dag-legend">
        <span>
          <svg width="36" height="10" aria-hidden="true">
            <path class="edge" d="M0,5 L36,5" />
          </svg>{" "}
          forward / rebalance
        </span>
        <span>
          <svg width="36" height="10" aria-hidden="true">
            <path class="edge partitioned" d="M0,5 L36,5" />
          </svg>{" "}
          partitioned by key (key groups)
        </span>
        <span>
          <span class="state-mark">◆</span> stateful (keyed state)
        </span>
        <span>
          <strong>×N</strong> parallelism of the task
        </span>
      </figcaption>
    </figure>
  );
}
