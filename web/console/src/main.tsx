// Entry point: read the API prefix (and the identity provider's sign-in,
// when the Hub has one) the Hub serves beside the console, then render the
// app.

import { render } from "preact";
import { setPrefix, setSignIn } from "./api";
import { App } from "./app";
import type { HubInfo } from "./types";

async function boot() {
  try {
    const r = await fetch("hub.json", { cache: "no-store", credentials: "omit" });
    if (r.ok) {
      const info = (await r.json()) as HubInfo;
      setPrefix(info.api_prefix);
      if (info.sign_in) setSignIn(info.sign_in);
    }
  } catch {
    /* the default prefix; the app shows the Hub as unreachable */
  }
  render(<App />, document.getElementById("app")!);
}

void boot();
