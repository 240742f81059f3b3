// Throughput from reported metrics. The Hub keeps only each node's latest
// report (long-term history is Prometheus' job: scrape /metrics), so the
// console samples while it is open: useRates polls a counter source every
// 5 s and turns successive samples into per-second rates, kept for 10
// minutes in memory and shared by every page that asks for the same key.

import { useEffect, useState } from "preact/hooks";
import type { Series } from "./ui";

const PERIOD_MS = 5000;
const KEEP_MS = 10 * 60_000;

interface Sampler {
  fetch: () => Promise<Record<string, number>>;
  last: { at: number; values: Record<string, number> } | null;
  rates: Map<string, [number, number][]>;
  subscribers: Set<() => void>;
  timer: ReturnType<typeof setInterval> | null;
}

const samplers = new Map<string, Sampler>();

async function tick(s: Sampler) {
  let values: Record<string, number>;
  try {
    values = await s.fetch();
  } catch {
    return; // a gap in the chart; the pages show the error themselves
  }
  const at = Date.now();
  if (s.last) {
    const dt = (at - s.last.at) / 1000;
    for (const [k, v] of Object.entries(values)) {
      const prev = s.last.values[k];
      if (prev === undefined || dt <= 0) continue;
      // A counter that went down was reset (a node restarted): no rate.
      const rate = v >= prev ? (v - prev) / dt : 0;
      const pts = s.rates.get(k) ?? [];
      pts.push([at, rate]);
      while (pts.length && pts[0][0] < at - KEEP_MS) pts.shift();
      s.rates.set(k, pts);
    }
  }
  s.last = { at, values };
  for (const f of s.subscribers) f();
}

/**
 * useRates samples fetch() (counters by name) every 5 s while a page uses
 * key, and returns one series per name in labels (name -> legend).
 */
export function useRates(key: string, fetch: () => Promise<Record<string, number>>, labels: Record<string, string>): Series[] {
  const [, bump] = useState(0);
  useEffect(() => {
    let s = samplers.get(key);
    if (!s) {
      s = { fetch, last: null, rates: new Map(), subscribers: new Set(), timer: null };
      samplers.set(key, s);
    }
    s.fetch = fetch;
    const sub = () => bump((n) => n + 1);
    s.subscribers.add(sub);
    if (!s.timer) {
      void tick(s);
      const t = s;
      s.timer = setInterval(() => void tick(t), PERIOD_MS);
    }
    return () => {
      s!.subscribers.delete(sub);
      if (s!.subscribers.size === 0 && s!.timer) {
        clearInterval(s!.timer);
        s!.timer = null;
      }
    };
  }, [key]);
  const s = samplers.get(key);
  return Object.entries(labels).map(([name, label]) => ({ name: label, points: s?.rates.get(name) ?? [] }));
}
