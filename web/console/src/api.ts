// The operator API client: every request carries the operator token from
// sessionStorage (never a URL) or, signed in through the Hub's identity
// provider, the Hub's HttpOnly session cookie (same origin only), and every
// error becomes an ApiError holding the Hub's problem envelope, or a
// network failure.

import type { SignInInfo } from "./types";

const TOKEN_KEY = "flowplane.operator_token";

let prefix = "/api/v1";

/** setPrefix sets the API prefix the Hub announced in /ui/hub.json. */
export function setPrefix(p: string) {
  prefix = p;
}

export function apiPrefix(): string {
  return prefix;
}

let signInInfo: SignInInfo | null = null;

/** setSignIn records the Hub's identity provider sign-in (hub.json). */
export function setSignIn(s: SignInInfo) {
  signInInfo = s;
}

/** signIn is the Hub's identity provider sign-in, or null when it has none. */
export function signIn(): SignInInfo | null {
  return signInInfo;
}

/**
 * signOutSession ends the Hub's session of this browser (a no-op without
 * one); the cookie is HttpOnly, so only the Hub can clear it.
 */
export async function signOutSession() {
  if (!signInInfo) return;
  try {
    await fetch(signInInfo.logout, { method: "POST", credentials: "same-origin", cache: "no-store" });
  } catch {
    /* the Hub is down: the session ends at its expiry */
  }
}

let readOnlyRole = false;

/**
 * setReadOnly records that the signed-in principal may only read (role
 * viewer): every write button is then disabled. The Hub refuses such
 * writes anyway (403); this only spares the attempt.
 */
export function setReadOnly(b: boolean) {
  readOnlyRole = b;
}

export function readOnly(): boolean {
  return readOnlyRole;
}

export function token(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? "";
}

export function setToken(t: string) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** Problem is the Hub's error envelope (docs/api-conventions.md). */
export interface Problem {
  code: string;
  message: string;
  correlation_id?: string;
  details?: Record<string, unknown>;
}

/**
 * ApiError is a failed call: status 0 means the Hub could not be reached
 * (network error, Hub down); otherwise the HTTP status and the problem.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem,
  ) {
    super(problem.message);
  }
  get code(): string {
    return this.problem.code;
  }
  /** unreachable: the Hub did not answer at all. */
  get unreachable(): boolean {
    return this.status === 0;
  }
}

/** describe turns any error into one sentence for a person. */
export function describe(err: unknown): string {
  if (err instanceof ApiError) {
    if (err.unreachable) return "Cannot reach the Hub: it may be down or restarting. Retrying on its own.";
    if (err.status === 401) return "The Hub did not accept the sign-in (401 unauthorized): the token is wrong or the session ended. Sign in again.";
    if (err.status === 412) return "Changed by someone else: this view was out of date, so nothing was changed. Reload and try again.";
    if (err.status === 503 && err.code === "recovering") return "The Hub is restoring its state; it will answer in a moment.";
    const p = err.problem;
    const errs = (p.details?.errors as { path: string; message: string }[] | undefined) ?? [];
    const more = errs.length ? ": " + errs.map((e) => (e.path ? e.path + ": " : "") + e.message).join("; ") : "";
    return `${p.message}${more} (${err.status} ${p.code})`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** Response of a call: the decoded body and the headers that matter. */
export interface Reply<T> {
  status: number;
  body: T;
  etag: string | null;
  location: string | null;
}

export interface CallOptions {
  method?: string;
  body?: unknown;
  ifMatch?: string;
  signal?: AbortSignal;
}

/** url joins the API prefix, a path and query parameters (empty ones dropped). */
export function url(path: string, query?: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return prefix + path + (s ? "?" + s : "");
}

/** headers are the headers of every operator call. */
export function headers(extra?: Record<string, string>): Record<string, string> {
  const h: Record<string, string> = { Accept: "application/json", ...extra };
  const t = token();
  if (t) h.Authorization = "Bearer " + t;
  return h;
}

let onUnauthorized: () => void = () => {};

/** setUnauthorizedHandler is called on every 401, to send the user to sign in. */
export function setUnauthorizedHandler(f: () => void) {
  onUnauthorized = f;
}

/** call sends one request to the operator API. A full URL from url() or a path is accepted. */
export async function call<T>(target: string, opts: CallOptions = {}): Promise<Reply<T>> {
  const method = opts.method ?? "GET";
  const extra: Record<string, string> = {};
  // Every mutation carries a JSON Content-Type, bodiless ones included
  // (the Hub answers 415 otherwise).
  if (method !== "GET") extra["Content-Type"] = "application/json";
  if (opts.ifMatch) extra["If-Match"] = opts.ifMatch;
  let resp: Response;
  try {
    resp = await fetch(target.startsWith(prefix) ? target : prefix + target, {
      method,
      headers: headers(extra),
      body: opts.body === undefined ? (method === "GET" ? undefined : "{}") : JSON.stringify(opts.body),
      signal: opts.signal,
      // The session cookie, if any, goes to the Hub's own origin only.
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch (e) {
    if (opts.signal?.aborted) throw e;
    throw new ApiError(0, { code: "unreachable", message: "cannot reach the Hub" });
  }
  const text = await resp.text();
  let body: unknown = null;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
  }
  if (!resp.ok) {
    const p = (body && typeof body === "object" ? body : { code: "http_" + resp.status, message: resp.statusText }) as Problem;
    if (resp.status === 401) onUnauthorized();
    throw new ApiError(resp.status, p);
  }
  return { status: resp.status, body: body as T, etag: resp.headers.get("ETag"), location: resp.headers.get("Location") };
}

export async function get<T>(path: string, query?: Record<string, string | number | undefined | null>, signal?: AbortSignal): Promise<T> {
  return (await call<T>(url(path, query), { signal })).body;
}

/** Page is the collection envelope of every list. */
export interface Page<T> {
  items: T[];
  page: number;
  page_size: number;
  total: number;
}

export const enc = encodeURIComponent;
