// The console's shell: sign-in, navigation, the live indicator with its
// pause switch, the theme switch, and the page of the current route.

import { useEffect, useState } from "preact/hooks";
import { ApiError, call, describe, setReadOnly, setToken, setUnauthorizedHandler, signIn, signOutSession, token } from "./api";
import { isPaused, setPaused, startLive, stopLive, useLiveState } from "./live";
import { pages } from "./pages/index";
import { href, match, useLocation } from "./router";
import type { System, Whoami } from "./types";
import { Empty, PageBoundary } from "./ui";

type Phase =
  | { kind: "checking" }
  | { kind: "login"; message?: string }
  | { kind: "down"; message: string }
  | { kind: "in"; system: System; who?: Whoami };

export function App() {
  const [phase, setPhase] = useState<Phase>({ kind: "checking" });

  const check = async (message?: string) => {
    try {
      const r = await call<System>("/system");
      // Who signed in, to show their name and, for a viewer, to disable
      // writes. A Hub without whoami (older) leaves writes enabled.
      let who: Whoami | undefined;
      try {
        who = (await call<Whoami>("/auth/whoami")).body;
      } catch (e) {
        if (e instanceof ApiError && e.status === 401) throw e;
      }
      setReadOnly(who !== undefined && !who.permissions.some((p) => p !== "read"));
      setPhase({ kind: "in", system: r.body, who });
      startLive();
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) {
        setPhase({ kind: "login", message: token() ? message ?? describe(e) : undefined });
      } else {
        setPhase({ kind: "down", message: describe(e) });
      }
    }
  };

  useEffect(() => {
    setUnauthorizedHandler(() => {
      stopLive();
      setPhase({ kind: "login", message: "The Hub no longer accepts the operator token or the session ended (401 unauthorized). Sign in again." });
    });
    void check();
  }, []);

  // While the Hub is down, try again every 2 s.
  useEffect(() => {
    if (phase.kind !== "down") return;
    const t = setTimeout(() => void check(), 2000);
    return () => clearTimeout(t);
  }, [phase]);

  switch (phase.kind) {
    case "checking":
      return <p class="boot muted">Connecting to the Hub…</p>;
    case "down":
      return (
        <main class="login" data-page="down">
          <h1>flowplane</h1>
          <div class="notice error" role="alert" data-state="hub-down">
            {phase.message}
          </div>
        </main>
      );
    case "login":
      return <Login message={phase.message} onSignedIn={() => void check("The Hub did not accept this token (401 unauthorized). Check SVC_OPERATOR_TOKEN and try again.")} />;
    case "in":
      return (
        <Shell
          system={phase.system}
          who={phase.who}
          onSignOut={() => {
            setToken("");
            setReadOnly(false);
            stopLive();
            void signOutSession().then(() => setPhase({ kind: "login" }));
          }}
        />
      );
  }
}

function Login(props: { message?: string; onSignedIn: () => void }) {
  const [value, setValue] = useState("");
  const idp = signIn();
  return (
    <main class="login" data-page="login">
      <h1>flowplane</h1>
      {idp ? (
        <p>
          {/* A navigation, not a fetch: the browser goes to the provider and comes back with the Hub's session cookie. */}
          <a class="button primary" href={idp.login} data-sign-in="provider">
            Sign in with {idp.provider}
          </a>
        </p>
      ) : null}
      <p class="muted">
        {idp ? "Or sign in " : "Sign in "}
        to the Hub with an operator token: SVC_OPERATOR_TOKEN, a named token, or an access token of the Hub's identity provider. It is kept in this tab only
        (sessionStorage).
      </p>
      <form
        data-form="login"
        onSubmit={(e) => {
          e.preventDefault();
          setToken(value.trim());
          props.onSignedIn();
        }}
      >
        <label>
          Operator token
          <input
            id="token"
            name="token"
            type="password"
            autocomplete="current-password"
            required
            autofocus={!idp}
            value={value}
            onInput={(e) => setValue(e.currentTarget.value)}
          />
        </label>
        <button type="submit" class="primary">
          Sign in
        </button>
      </form>
      {props.message ? (
        <div class="notice error" role="alert" data-state="login-error">
          {props.message}
        </div>
      ) : null}
    </main>
  );
}

// HABadge says whether the Hub this console talks to leads or stands by,
// and which Hub leads, at which lease epoch; it asks again every 5 s, so a
// standby taking over shows within seconds.
function HABadge(props: { initial: System }) {
  const [ha, setHA] = useState(props.initial.ha);
  useEffect(() => {
    let stopped = false;
    const t = setInterval(() => {
      call<System>("/system")
        .then((r) => !stopped && setHA(r.body.ha))
        .catch(() => undefined); // the live indicator and banners say the Hub is away
    }, 5000);
    return () => {
      stopped = true;
      clearInterval(t);
    };
  }, []);
  if (!ha) return null;
  const leader = ha.leader ? ha.leader.id || ha.leader.address || "" : "";
  const text = ha.role === "leader" ? "leader" : leader ? `standby · leader ${leader}` : "standby · no leader";
  return (
    <span class="ha muted" data-ha-role={ha.role} data-ha-epoch={ha.epoch} title={`This Hub is the ${ha.role}; lease epoch ${ha.epoch}${leader ? `; the leader is ${leader}` : ""}`}>
      Hub {text}
    </span>
  );
}

function Shell(props: { system: System; who?: Whoami; onSignOut: () => void }) {
  const loc = useLocation();
  const live = useLiveState();
  const [theme, setTheme] = useState(localStorage.getItem("flowplane.theme") ?? "");
  useEffect(() => {
    if (theme) document.documentElement.dataset.theme = theme;
    else delete document.documentElement.dataset.theme;
    localStorage.setItem("flowplane.theme", theme);
  }, [theme]);

  let page = null;
  let params: Record<string, string> = {};
  for (const p of pages) {
    const m = match(p.path, loc.path === "/" ? "/fleet" : loc.path);
    if (m) {
      page = p;
      params = m;
      break;
    }
  }
  useEffect(() => {
    document.title = (page ? page.title + " · " : "") + "flowplane console";
  }, [page]);
  const nav = pages.filter((p) => p.nav).sort((a, b) => (a.order ?? 99) - (b.order ?? 99));
  const section = "/" + (loc.path === "/" ? "fleet" : loc.path.split("/")[1]);
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={href("/fleet")}>
          flowplane
        </a>
        <nav aria-label="Sections">
          {nav.map((p) => (
            <a key={p.path} href={href(p.path)} aria-current={section === p.path ? "page" : undefined}>
              {p.nav}
            </a>
          ))}
        </nav>
        <div class="top-actions">
          <span class="live" data-live={live} title="Live updates from the Hub's event stream">
            {live === "live" ? "● live" : live === "paused" ? "❚❚ paused" : live === "connecting" ? "○ connecting" : "○ reconnecting"}
          </span>
          <button type="button" class="ghost" data-live-toggle aria-pressed={isPaused()} onClick={() => setPaused(!isPaused())}>
            {live === "paused" ? "Resume live" : "Pause live"}
          </button>
          <button
            type="button"
            class="ghost"
            title="Theme: system, light or dark"
            onClick={() => setTheme(theme === "" ? "light" : theme === "light" ? "dark" : "")}
          >
            {theme === "" ? "◐ system" : theme === "light" ? "☀ light" : "☾ dark"}
          </button>
          <HABadge initial={props.system} />
          {props.who ? (
            <span class="principal muted" data-principal={props.who.principal} title={`${props.who.kind} principal; scopes: ${props.who.scopes.join(", ") || "all"}`}>
              {props.who.principal} · {props.who.roles.join(", ") || "no role"}
            </span>
          ) : null}
          <button type="button" class="ghost" onClick={props.onSignOut}>
            Sign out
          </button>
        </div>
      </header>
      {props.system.insecure_local ? (
        <div class="notice warn banner" role="status">
          This Hub runs in insecure local mode{props.system.storage === "volatile" ? " with volatile storage (lost at exit)" : ""}.
        </div>
      ) : null}
      {live === "reconnecting" ? (
        <div class="notice warn banner" role="status" data-state="reconnecting">
          Lost the Hub's event stream; reconnecting. Figures may be out of date.
        </div>
      ) : null}
      <main id="main" data-page={page?.name ?? "not-found"} tabIndex={-1}>
        {page ? (
          // Keyed by path: another page (or another job's) mounts fresh
          // instead of reusing this one's state.
          <PageBoundary key={loc.path}>
            <page.component key={loc.path} params={params} query={loc.query} />
          </PageBoundary>
        ) : (
          <Empty>
            No page at <code>{loc.path}</code>. <a href={href("/fleet")}>Go to the fleet overview.</a>
          </Empty>
        )}
      </main>
    </>
  );
}
