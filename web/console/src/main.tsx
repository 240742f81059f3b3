// Entry point: read the API prefix the Hub serves beside the console, then
// render the app.

import { render } from "preact";
import { setPrefix } from "./api";
import { App } from "./app";
import type { HubInfo } from "./types";

async function boot() {
  try {
    const r = await fetch("hub.json", { cache: "no-store", credentials: "omit" });
    if (r.ok) setPrefix(((await r.json()) as HubInfo).api_prefix);
  } catch {
    /* the default prefix; the app shows the Hub as unreachable */
  }
  render(<App />, document.getElementById("app")!);
}

void boot();
