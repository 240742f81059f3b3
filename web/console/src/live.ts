// The live connection: one Server-Sent Events subscription to
// {prefix}/events/stream for the whole console, read with fetch (an
// EventSource cannot send the Authorization header), resumed with
// Last-Event-ID after every drop and reconnected on its own, after the
// Hub's retry hint, with backoff up to 10 s. Pages register listeners with
// useLive and re-fetch what an event touches.

import { useEffect, useRef, useState } from "preact/hooks";
import { headers, url } from "./api";
import type { HubEvent } from "./types";

/** SSEFrame is one server-sent event: its id, name, data and retry field. */
export interface SSEFrame {
  id: string;
  event: string;
  data: string;
  retry?: number;
}

/**
 * sseFrames reads a text/event-stream body (API.md's framing) and yields
 * each event once its blank line arrives; comments are skipped.
 */
export async function* sseFrames(body: NonNullable<Response["body"]>): AsyncGenerator<SSEFrame> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let f: SSEFrame = { id: "", event: "", data: "" };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        yield f;
        f = { id: "", event: "", data: "" };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") f.id = val;
      else if (field === "event") f.event = val;
      else if (field === "data") f.data = f.data ? f.data + "\n" + val : val;
      else if (field === "retry" && /^\d+$/.test(val)) f.retry = Number(val);
    }
  }
}

export type LiveState = "connecting" | "live" | "reconnecting" | "paused";

type Listener = (ev: HubEvent | null) => void; // null: resync, re-fetch everything

const listeners = new Set<Listener>();
const stateListeners = new Set<(s: LiveState) => void>();
let state: LiveState = "connecting";
let lastEventID = "";
let paused = false;
let controller: AbortController | null = null;
let started = false;

function setState(s: LiveState) {
  state = s;
  for (const f of stateListeners) f(s);
}

export function liveState(): LiveState {
  return state;
}

/** pauseLive stops delivering events to pages (the connection stays up); resume re-fetches. */
export function setPaused(p: boolean) {
  paused = p;
  setState(p ? "paused" : controller ? "live" : "reconnecting");
  if (!p) emit(null);
}

export function isPaused(): boolean {
  return paused;
}

function emit(ev: HubEvent | null) {
  if (paused) return;
  for (const f of listeners) f(ev);
}

/** startLive opens the subscription once; stopLive closes it (sign-out). */
export function startLive() {
  if (started) return;
  started = true;
  void loop();
}

export function stopLive() {
  started = false;
  controller?.abort();
}

async function loop() {
  let retry = 2000;
  let failures = 0;
  while (started) {
    controller = new AbortController();
    try {
      const h = headers({ Accept: "text/event-stream" });
      if (lastEventID) h["Last-Event-ID"] = lastEventID;
      const resp = await fetch(url("/events/stream"), { headers: h, signal: controller.signal, cache: "no-store", credentials: "same-origin" });
      if (!resp.ok || !resp.body) throw new Error("events stream: HTTP " + resp.status);
      failures = 0;
      if (!paused) setState("live");
      // Events missed while disconnected are replayed after Last-Event-ID;
      // a page re-fetches anyway, in case the Hub restarted with fewer.
      emit(null);
      for await (const f of sseFrames(resp.body)) {
        if (f.retry !== undefined) retry = f.retry;
        if (f.id) lastEventID = f.id;
        if (f.event === "resync") emit(null);
        else if (f.data) {
          try {
            emit(JSON.parse(f.data) as HubEvent);
          } catch {
            /* a malformed record is skipped */
          }
        }
      }
    } catch {
      failures++;
    }
    controller = null;
    if (!started) break;
    if (!paused) setState("reconnecting");
    await new Promise((r) => setTimeout(r, Math.min(retry * Math.max(1, failures), 10000)));
  }
}

/**
 * useLive calls refetch when an event that match accepts arrives (or on a
 * resync and a reconnect), at most every 500 ms whatever the event rate,
 * so a burst over 10,000 streams costs one request per page.
 */
export function useLive(match: (ev: HubEvent) => boolean, refetch: () => void) {
  const m = useRef(match);
  const f = useRef(refetch);
  m.current = match;
  f.current = refetch;
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | null = null;
    let last = 0;
    const fire = () => {
      timer = null;
      last = Date.now();
      f.current();
    };
    const l: Listener = (ev) => {
      if (ev && !m.current(ev)) return;
      if (timer) return;
      timer = setTimeout(fire, Math.max(0, 500 - (Date.now() - last)));
    };
    listeners.add(l);
    return () => {
      listeners.delete(l);
      if (timer) clearTimeout(timer);
    };
  }, []);
}

/** useEvents hands every event to f as it arrives (the events tail). */
export function useEvents(f: (ev: HubEvent | null) => void) {
  const r = useRef(f);
  r.current = f;
  useEffect(() => {
    const l: Listener = (ev) => r.current(ev);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
}

/**
 * whenLive resolves true once the event stream is up (at once when it is),
 * or false after timeoutMs: an action that could not reach the Hub waits
 * for it to be back before its one retry.
 */
export function whenLive(timeoutMs: number): Promise<boolean> {
  if (state === "live") return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(t);
      stateListeners.delete(f);
      resolve(ok);
    };
    const f = (s: LiveState) => {
      if (s === "live") done(true);
    };
    const t = setTimeout(() => done(false), timeoutMs);
    stateListeners.add(f);
  });
}

export function useLiveState(): LiveState {
  const [s, set] = useState(state);
  useEffect(() => {
    stateListeners.add(set);
    set(state);
    return () => void stateListeners.delete(set);
  }, []);
  return s;
}
