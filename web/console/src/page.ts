// A page of the console: a route pattern, a title, an optional entry in
// the navigation, and the component that renders it. Each page is one file
// under pages/ that exports its PageDefs; pages/index.ts lists the files.

import type { JSX } from "preact";

export interface PageProps {
  params: Record<string, string>;
  query: URLSearchParams;
}

export interface PageDef {
  /** Route pattern, e.g. "/nodes/:node_id". */
  path: string;
  /** Name of the page in data-page, for tests and styles. */
  name: string;
  title: string;
  /** Label in the navigation bar, and its place (lower first). */
  nav?: string;
  order?: number;
  component: (p: PageProps) => JSX.Element;
}
