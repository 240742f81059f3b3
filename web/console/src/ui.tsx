// The console's shared parts: data loading with live refresh, states
// (loading, error, empty), tables with paging, filters, confirmations,
// badges, times and a line chart. Pages are built from these only.

import { Component, type ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApiError, describe, readOnly } from "./api";
import { useLive, whenLive } from "./live";
import { setQuery } from "./router";
import type { HubEvent } from "./types";

// ---------------------------------------------------------------- loading

export interface Resource<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

/**
 * useResource loads fetcher() now, again when key changes, and whenever a
 * live event matches. A failed re-fetch keeps the last data and shows the
 * error beside it.
 */
export function useResource<T>(fetcher: (signal: AbortSignal) => Promise<T>, key: string, live?: (ev: HubEvent) => boolean): Resource<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const seq = useRef(0);
  const f = useRef(fetcher);
  f.current = fetcher;
  const load = useCallback(() => {
    const n = ++seq.current;
    const ctl = new AbortController();
    setLoading(true);
    f.current(ctl.signal).then(
      (d) => {
        if (n !== seq.current) return;
        setData(d);
        setError(null);
        setLoading(false);
      },
      (e) => {
        if (n !== seq.current || ctl.signal.aborted) return;
        setError(e);
        setLoading(false);
      },
    );
    return ctl;
  }, []);
  useEffect(() => {
    setData(undefined);
    const ctl = load();
    return () => ctl.abort();
  }, [key]);
  useLive(live ?? (() => false), () => void load());
  return { data, error, loading, reload: () => void load() };
}

/** Loaded renders children with the data, or the loading, error or empty state. */
export function Loaded<T>(props: {
  res: Resource<T>;
  empty?: (d: T) => ComponentChildren | null;
  children: (d: T) => ComponentChildren;
}) {
  const { res } = props;
  if (res.data === undefined) {
    if (res.error) return <ErrorState error={res.error} retry={res.reload} />;
    return <p class="muted" data-state="loading" aria-busy="true">Loading…</p>;
  }
  const e = props.empty?.(res.data);
  return (
    <>
      {res.error ? <ErrorState error={res.error} retry={res.reload} stale /> : null}
      {e ? <Empty>{e}</Empty> : props.children(res.data)}
    </>
  );
}

export function ErrorState(props: { error: unknown; retry?: () => void; stale?: boolean }) {
  const e = props.error;
  const notFound = e instanceof ApiError && e.status === 404;
  return (
    <div class={"notice " + (notFound ? "warn" : "error")} role="alert" data-state="error">
      <span>
        {describe(e)}
        {props.stale ? " Showing what was last loaded." : ""}
      </span>
      {props.retry && !notFound ? (
        <button type="button" onClick={props.retry}>
          Retry
        </button>
      ) : null}
    </div>
  );
}

/**
 * PageBoundary shows a page's render error in place of the page, with a
 * retry, instead of leaving a half-updated page: an error thrown while
 * rendering would otherwise escape Preact's render loop, keep the page's
 * effects re-running (a request loop) and leave its DOM behind under the
 * next page. The shell keys it by route, so another page starts clean.
 */
export class PageBoundary extends Component<{ children: ComponentChildren }, { error: unknown }> {
  state = { error: null as unknown };
  static getDerivedStateFromError(error: unknown) {
    return { error };
  }
  componentDidCatch(error: unknown) {
    console.warn("console page error:", error);
  }
  render() {
    if (this.state.error) {
      return (
        <div class="notice error" role="alert" data-state="page-error">
          <span>This page failed to render: {String(this.state.error)}.</span>
          <button type="button" onClick={() => this.setState({ error: null })}>
            Retry
          </button>
        </div>
      );
    }
    return this.props.children;
  }
}

export function Empty(props: { children: ComponentChildren }) {
  return (
    <div class="empty" data-state="empty">
      {props.children}
    </div>
  );
}

/** Notice is a message after an action: ok, or an error with an optional reload. */
export function Notice(props: { kind: "ok" | "error" | "warn"; children: ComponentChildren; onReload?: () => void; onClose?: () => void }) {
  return (
    <div class={"notice " + props.kind} role={props.kind === "ok" ? "status" : "alert"} data-notice={props.kind}>
      <span>{props.children}</span>
      {props.onReload ? (
        <button type="button" onClick={props.onReload}>
          Reload
        </button>
      ) : null}
      {props.onClose ? (
        <button type="button" class="ghost" aria-label="Dismiss" onClick={props.onClose}>
          ×
        </button>
      ) : null}
    </div>
  );
}

// ---------------------------------------------------------------- actions

export interface ActionState {
  busy: boolean;
  notice: { kind: "ok" | "error" | "warn"; text: ComponentChildren; conflict?: boolean } | null;
  run: (f: () => Promise<ComponentChildren>) => Promise<void>;
  clear: () => void;
  /** settle replaces the notice once what it waited for happened (a write converged). */
  settle: (text: ComponentChildren) => void;
}

/**
 * useAction runs one mutation at a time and keeps its outcome: the
 * returned text on success, the problem otherwise; a 412 is flagged as a
 * conflict so the page offers a reload.
 */
export function useAction(): ActionState {
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState<ActionState["notice"]>(null);
  const run = async (f: () => Promise<ComponentChildren>) => {
    setBusy(true);
    setNotice(null);
    try {
      try {
        setNotice({ kind: "ok", text: await f() });
      } catch (e) {
        // Not sent, or no answer: never dropped silently. Once the Hub is
        // back (its event stream live again, within a minute) the action
        // runs once more (a write carries its If-Match: it cannot apply
        // twice over someone else's); otherwise it has clearly failed.
        if (!(e instanceof ApiError && e.status === 0)) throw e;
        setNotice({ kind: "warn", text: "Cannot reach the Hub: this action runs again once the Hub is back (up to a minute)." });
        if (!(await whenLive(60_000))) throw new ApiError(0, { code: "unreachable", message: "cannot reach the Hub: the action was not carried out" });
        setNotice({ kind: "ok", text: await f() });
      }
    } catch (e) {
      const conflict = e instanceof ApiError && e.status === 412;
      setNotice({ kind: conflict ? "warn" : "error", text: describe(e), conflict });
    } finally {
      setBusy(false);
    }
  };
  return { busy, notice, run, clear: () => setNotice(null), settle: (text) => setNotice({ kind: "ok", text }) };
}

/** ActionNotice shows useAction's outcome; a conflict gets a Reload button. */
export function ActionNotice(props: { action: ActionState; reload: () => void }) {
  const n = props.action.notice;
  if (!n) return null;
  return (
    <Notice
      kind={n.kind}
      onClose={props.action.clear}
      onReload={
        n.conflict
          ? () => {
              props.action.clear();
              props.reload();
            }
          : undefined
      }
    >
      {n.text}
    </Notice>
  );
}

/**
 * Confirm is a button that asks first, in a modal dialog (Escape cancels,
 * focus starts on Cancel), then calls onConfirm.
 */
export function Confirm(props: {
  label: string;
  title: string;
  children: ComponentChildren;
  onConfirm: () => void;
  disabled?: boolean;
  danger?: boolean;
  confirmLabel?: string;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const open = () => ref.current?.showModal();
  const close = () => ref.current?.close();
  return (
    <>
      <button
        type="button"
        class={props.danger ? "danger" : ""}
        disabled={props.disabled || readOnly()}
        title={readOnly() ? "Your role may only read" : undefined}
        data-write
        onClick={open}
      >
        {props.label}
      </button>
      <dialog ref={ref} aria-label={props.title} data-confirm={props.label}>
        <h3>{props.title}</h3>
        <div class="dialog-body">{props.children}</div>
        <div class="actions">
          <button type="button" autofocus onClick={close}>
            Cancel
          </button>
          <button
            type="button"
            class={props.danger ? "danger" : "primary"}
            data-confirm-ok
            onClick={() => {
              close();
              props.onConfirm();
            }}
          >
            {props.confirmLabel ?? "Confirm"}
          </button>
        </div>
      </dialog>
    </>
  );
}

// ---------------------------------------------------------------- layout

export function PageHeader(props: { title: ComponentChildren; sub?: ComponentChildren; children?: ComponentChildren }) {
  return (
    <header class="page-header">
      <div>
        <h1>{props.title}</h1>
        {props.sub ? <p class="muted">{props.sub}</p> : null}
      </div>
      {props.children ? <div class="actions">{props.children}</div> : null}
    </header>
  );
}

export function Section(props: { title: ComponentChildren; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section class="card">
      <div class="card-head">
        <h2>{props.title}</h2>
        {props.actions ? <div class="actions">{props.actions}</div> : null}
      </div>
      {props.children}
    </section>
  );
}

/** KV is a two-column list of facts; empty values show as "—". */
export function KV(props: { rows: [string, ComponentChildren][] }) {
  return (
    <dl class="kv">
      {props.rows.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd data-field={k}>{v === undefined || v === null || v === "" ? "—" : v}</dd>
        </div>
      ))}
    </dl>
  );
}

/** Badge shows a state; its colour comes from the value (data-value). */
export function Badge(props: { value: string | undefined | null; title?: string }) {
  const v = props.value || "unknown";
  return (
    <span class="badge" data-value={v} title={props.title}>
      {v.replace(/_/g, " ")}
    </span>
  );
}

/**
 * who is the actor of a record with how it authenticated, "alice (oidc)";
 * the actor alone on records kept before the Hub recorded kinds.
 */
export function who(r: { actor?: string; actor_kind?: string }): string {
  if (!r.actor) return "";
  return r.actor_kind ? `${r.actor} (${r.actor_kind})` : r.actor;
}

/** Time shows a timestamp as "12 s ago" with the exact time on hover. */
export function Time(props: { at: string | undefined | null }) {
  if (!props.at) return <span class="muted">—</span>;
  return (
    <time dateTime={props.at} title={props.at}>
      {ago(props.at)}
    </time>
  );
}

export function ago(at: string, now = Date.now()): string {
  const ms = now - Date.parse(at);
  if (Number.isNaN(ms)) return at;
  const past = ms >= 0;
  const s = Math.round(Math.abs(ms) / 1000);
  const t = s < 60 ? `${s} s` : s < 3600 ? `${Math.round(s / 60)} min` : s < 86400 ? `${Math.round(s / 3600)} h` : `${Math.round(s / 86400)} d`;
  return past ? `${t} ago` : `in ${t}`;
}

export function duration(ms: number | undefined | null): string {
  if (ms === undefined || ms === null) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${Math.round(s / 86400)} d`;
}

// MAX_DATE_MS is the largest time a JavaScript Date holds (±100,000,000
// days); a watermark past it is a node's "end of input" (math.MaxInt64).
const MAX_DATE_MS = 8.64e15;

/** instant formats milliseconds since the epoch as "2026-11-28 14:50:21.123", never throwing. */
export function instant(ms: number | undefined | null): string {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return "—";
  if (ms >= MAX_DATE_MS) return "end of input";
  if (ms <= -MAX_DATE_MS) return "—";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", "");
}

export function num(n: number | undefined | null): string {
  if (n === undefined || n === null) return "—";
  return n.toLocaleString("en-US", { maximumFractionDigits: 1 });
}

// ---------------------------------------------------------------- tables

export interface Column<T> {
  key: string;
  label: string;
  render: (row: T) => ComponentChildren;
  class?: string;
}

/**
 * Table renders one page of rows. The first column should hold the link to
 * the row's detail, so Tab and Enter reach every row.
 */
export function Table<T>(props: { name: string; columns: Column<T>[]; rows: T[]; rowKey: (r: T) => string; caption?: string }) {
  return (
    <div class="table-wrap">
      <table data-table={props.name}>
        {props.caption ? <caption class="sr-only">{props.caption}</caption> : null}
        <thead>
          <tr>
            {props.columns.map((c) => (
              <th key={c.key} scope="col" class={c.class}>
                {c.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((r) => (
            <tr key={props.rowKey(r)} data-key={props.rowKey(r)}>
              {props.columns.map((c) => (
                <td key={c.key} data-col={c.key} class={c.class}>
                  {c.render(r)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/**
 * Pager moves through a collection (the Hub's page and page_size): it sets
 * the URL's page, or param when a page holds several paged tables.
 */
export function Pager(props: { page: number; pageSize: number; total: number; param?: string }) {
  const param = props.param ?? "page";
  const pages = Math.max(1, Math.ceil(props.total / props.pageSize));
  const from = props.total === 0 ? 0 : (props.page - 1) * props.pageSize + 1;
  const to = Math.min(props.total, props.page * props.pageSize);
  return (
    <nav class="pager" aria-label={param === "page" ? "Pages" : "Pages of " + param.replace(/_page$/, "")} data-pager={param}>
      <span class="muted">
        {num(from)}–{num(to)} of {num(props.total)}
      </span>
      <button type="button" disabled={props.page <= 1} onClick={() => setQuery({ [param]: props.page - 1 })}>
        ‹ Previous
      </button>
      <span>
        page {props.page} of {pages}
      </span>
      <button type="button" disabled={props.page >= pages} onClick={() => setQuery({ [param]: props.page + 1 })}>
        Next ›
      </button>
    </nav>
  );
}

/** pageOf reads the page number from the URL query (1 when absent or bad). */
export function pageOf(q: URLSearchParams): number {
  const p = Number(q.get("page") ?? "1");
  return Number.isInteger(p) && p >= 1 ? p : 1;
}

// ---------------------------------------------------------------- filters

export function Filters(props: { children: ComponentChildren }) {
  return (
    <form class="filters" role="search" onSubmit={(e) => e.preventDefault()}>
      {props.children}
    </form>
  );
}

/** SelectFilter binds a <select> to one URL query parameter. */
export function SelectFilter(props: { name: string; label: string; value: string; options: string[] }) {
  return (
    <label>
      {props.label}
      <select name={props.name} value={props.value} onChange={(e) => setQuery({ [props.name]: (e.currentTarget as HTMLSelectElement).value })}>
        <option value="">any</option>
        {props.options.map((o) => (
          <option key={o} value={o}>
            {o.replace(/_/g, " ")}
          </option>
        ))}
      </select>
    </label>
  );
}

/** TextFilter binds a text input to one URL query parameter, applied on Enter or blur. */
export function TextFilter(props: { name: string; label: string; value: string; placeholder?: string }) {
  const apply = (el: HTMLInputElement) => {
    const v = el.value.trim();
    if (v !== props.value) setQuery({ [props.name]: v });
  };
  return (
    <label>
      {props.label}
      <input
        name={props.name}
        type="search"
        value={props.value}
        placeholder={props.placeholder}
        onBlur={(e) => apply(e.currentTarget)}
        onKeyDown={(e) => {
          if (e.key === "Enter") apply(e.currentTarget);
        }}
      />
    </label>
  );
}

// ---------------------------------------------------------------- charts

export interface Series {
  name: string;
  points: [number, number][]; // [time ms, value]
}

/**
 * LineChart draws series over time in SVG (no library): the last
 * `windowMs` up to now, with the y axis from 0 to the largest value.
 */
export function LineChart(props: { series: Series[]; unit: string; windowMs?: number; height?: number; label: string }) {
  const w = 600;
  const h = props.height ?? 160;
  const pad = { l: 48, r: 8, t: 8, b: 20 };
  const now = Date.now();
  const span = props.windowMs ?? 5 * 60_000;
  const t0 = now - span;
  const pts = props.series.flatMap((s) => s.points.filter((p) => p[0] >= t0));
  const ymax = Math.max(1, ...pts.map((p) => p[1]));
  const x = (t: number) => pad.l + ((t - t0) / span) * (w - pad.l - pad.r);
  const y = (v: number) => h - pad.b - (v / ymax) * (h - pad.t - pad.b);
  if (pts.length === 0) {
    return (
      <figure class="chart" data-chart={props.label}>
        <figcaption>{props.label}</figcaption>
        <p class="muted" data-chart-empty>No samples yet: the Hub samples what the nodes report every 10 s and keeps an hour; the chart fills from the second sample.</p>
      </figure>
    );
  }
  return (
    <figure class="chart" data-chart={props.label}>
      <figcaption>{props.label}</figcaption>
      <svg viewBox={`0 0 ${w} ${h}`} role="img" aria-label={props.label}>
        <line class="axis" x1={pad.l} y1={h - pad.b} x2={w - pad.r} y2={h - pad.b} />
        <line class="axis" x1={pad.l} y1={pad.t} x2={pad.l} y2={h - pad.b} />
        <text class="tick" x={pad.l - 4} y={pad.t + 8} text-anchor="end">
          {num(ymax)}
        </text>
        <text class="tick" x={pad.l - 4} y={h - pad.b} text-anchor="end">
          0
        </text>
        <text class="tick" x={pad.l} y={h - 4}>
          −{Math.round(span / 60000)} min
        </text>
        <text class="tick" x={w - pad.r} y={h - 4} text-anchor="end">
          now
        </text>
        {props.series.map((s, i) => (
          <polyline
            key={s.name}
            class={"line s" + (i % 6)}
            points={s.points
              .filter((p) => p[0] >= t0)
              .map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`)
              .join(" ")}
          />
        ))}
      </svg>
      <ul class="legend">
        {props.series.map((s, i) => (
          <li key={s.name} class={"s" + (i % 6)}>
            {s.name} ({props.unit})
          </li>
        ))}
      </ul>
    </figure>
  );
}
