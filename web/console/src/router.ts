// Hash routing: "#/streams?node_id=a" is the path "/streams" with its
// filters. The hash keeps the console one document the Hub serves as is,
// and puts filters (never the token) in a URL one can share or bookmark.

import { useEffect, useState } from "preact/hooks";

export interface Location {
  path: string;
  query: URLSearchParams;
}

function read(): Location {
  const h = location.hash.replace(/^#/, "") || "/";
  const q = h.indexOf("?");
  return { path: q < 0 ? h : h.slice(0, q), query: new URLSearchParams(q < 0 ? "" : h.slice(q + 1)) };
}

export function useLocation(): Location {
  const [loc, set] = useState(read);
  useEffect(() => {
    const f = () => set(read());
    addEventListener("hashchange", f);
    // The hash may have changed between the first render and this effect
    // (a link followed while the console was still starting): read it again.
    f();
    return () => removeEventListener("hashchange", f);
  }, []);
  return loc;
}

/** href builds "#/path?k=v" (empty values dropped). */
export function href(path: string, query?: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return "#" + path + (s ? "?" + s : "");
}

export function navigate(path: string, query?: Record<string, string | number | undefined | null>) {
  location.hash = href(path, query).slice(1);
}

/** setQuery changes some filters of the current page (and goes back to page 1 unless page is given). */
export function setQuery(patch: Record<string, string | number | undefined | null>) {
  const cur = read();
  const q: Record<string, string> = {};
  cur.query.forEach((v, k) => (q[k] = v));
  if (!("page" in patch)) delete q.page;
  for (const [k, v] of Object.entries(patch)) {
    if (v === undefined || v === null || v === "") delete q[k];
    else q[k] = String(v);
  }
  navigate(cur.path, q);
}

/** match matches a pattern such as "/nodes/:node_id" against a path. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const ps = pattern.split("/").filter(Boolean);
  const xs = path.split("/").filter(Boolean);
  if (ps.length !== xs.length) return null;
  const out: Record<string, string> = {};
  for (let i = 0; i < ps.length; i++) {
    if (ps[i].startsWith(":")) {
      try {
        out[ps[i].slice(1)] = decodeURIComponent(xs[i]);
      } catch {
        return null;
      }
    } else if (ps[i] !== xs[i]) return null;
  }
  return out;
}
