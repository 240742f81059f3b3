// Throughput charts from the Hub's rate history: the Hub samples what the
// nodes report every 10 s and keeps an hour of per-second rates in memory
// (GET .../history; docs/hub-api.md "History"), so a chart opens filled.
// useHistory loads a series and loads it again at every step while the
// page is open.

import { useEffect } from "preact/hooks";
import { get } from "./api";
import { useResource, type Series } from "./ui";

/** History is the answer of a history route. */
export interface History {
  step_ms: number;
  retention_ms: number;
  series: { name: string; points: [number, number][] }[];
}

export interface Rates {
  series: Series[];
  /** windowMs is the span the chart shows: the history kept, at least 5 minutes. */
  windowMs: number;
}

/**
 * useHistory returns the rates of path (a history route), one series per
 * name in labels (name -> legend), refreshed every step.
 */
export function useHistory(path: string, labels: Record<string, string>): Rates {
  const res = useResource((s) => get<History>(path, undefined, s), "history:" + path);
  const step = res.data?.step_ms ?? 10_000;
  const reload = res.reload;
  useEffect(() => {
    const t = setInterval(reload, Math.max(1000, step));
    return () => clearInterval(t);
  }, [path, step]);
  const h = res.data;
  const series = Object.entries(labels).map(([name, label]) => ({ name: label, points: h?.series.find((s) => s.name === name)?.points ?? [] }));
  const oldest = Math.min(...series.flatMap((s) => s.points.map((p) => p[0])), Date.now());
  const windowMs = Math.min(h?.retention_ms ?? 3_600_000, Math.max(5 * 60_000, Date.now() - oldest + step));
  return { series, windowMs };
}
