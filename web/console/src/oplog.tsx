// Parts shared by the operations, events and audit pages: links to the
// node, resource and operation a record names, JSON and diff blocks, and
// the event kinds the Hub emits.

import type { ComponentChildren } from "preact";
import { href } from "./router";
import type { HubEvent } from "./types";

/** EVENT_KINDS are the kinds of docs/events.md (the Hub's, then the node-local ones). */
export const EVENT_KINDS = [
  "intent_accepted",
  "command_dispatched",
  "command_acknowledged",
  "command_succeeded",
  "command_failed",
  "command_timed_out",
  "operation_cancelled",
  "convergence_changed",
  "stream_state_changed",
  "node_registered",
  "node_online",
  "node_unavailable",
  "node_restarted",
  "node_maintenance_changed",
  "rollout_changed",
  "job_state_changed",
  "checkpoint_completed",
  "savepoint_completed",
  "configuration_applied",
  "node_started",
];

const JOB_EVENT_KINDS = new Set(["job_state_changed", "checkpoint_completed", "savepoint_completed"]);

/** NodeLink links a node id to its page; empty ids show "—". */
export function NodeLink(props: { id: string | undefined | null }) {
  if (!props.id) return <span class="muted">—</span>;
  return <a href={href("/nodes/" + encodeURIComponent(props.id))}>{props.id}</a>;
}

/** OperationLink links an operation id to its detail page, shortened to its tail. */
export function OperationLink(props: { id: string | undefined | null; children?: ComponentChildren }) {
  if (!props.id) return <span class="muted">—</span>;
  return (
    <a class="mono" href={href("/operations/" + encodeURIComponent(props.id))} title={props.id}>
      {props.children ?? shortID(props.id)}
    </a>
  );
}

/** shortID keeps the last 12 characters of a UUID (its random, distinct part). */
export function shortID(id: string): string {
  return id.length > 16 ? "…" + id.slice(-12) : id;
}

/**
 * resourceHref is the console page of a resource of type t (stream, job,
 * rollout, node, configuration), or null when there is none.
 */
export function resourceHref(t: string | undefined, id: string | undefined, node: string | undefined): string | null {
  if (!id) return null;
  const e = encodeURIComponent;
  switch (t) {
    case "job":
      return href("/jobs/" + e(id));
    case "rollout":
      return href("/rollouts/" + e(id));
    case "node":
      return href("/nodes/" + e(id));
    case "configuration":
      return node ? href("/configuration", { node_id: node }) : null;
    case "stream":
    case undefined:
    case "":
      return node ? href("/nodes/" + e(node) + "/streams/" + e(id)) : null;
  }
  return null;
}

/** ResourceLink shows a resource id, linked to its page when it has one. */
export function ResourceLink(props: { type?: string; id: string | undefined | null; node?: string }) {
  if (!props.id) return <span class="muted">—</span>;
  const to = resourceHref(props.type, props.id, props.node);
  return to ? <a href={to}>{props.id}</a> : <span>{props.id}</span>;
}

/** eventResourceType tells what an event's resource_id names. */
export function eventResourceType(ev: HubEvent): string | undefined {
  if (ev.kind === "rollout_changed") return "rollout";
  if (ev.kind === "node_maintenance_changed") return "node";
  if (JOB_EVENT_KINDS.has(ev.kind)) return "job";
  if (ev.resource_id === "configuration" || ev.kind === "configuration_applied") return "configuration";
  const t = ev.data?.resource_type;
  return typeof t === "string" ? t : undefined;
}

/** operationResourceType tells what an operation's resource_id names, from its name. */
export function operationResourceType(operation: string, resourceID: string): string | undefined {
  if (operation.startsWith("job_")) return "job";
  if (operation.startsWith("configuration_") || resourceID === "configuration") return "configuration";
  if (operation.startsWith("stream_")) return "stream";
  return undefined;
}

/** JSONBlock pretty-prints a value. */
export function JSONBlock(props: { value: unknown; label?: string }) {
  return (
    <pre class="json" aria-label={props.label}>
      {JSON.stringify(props.value, null, 2)}
    </pre>
  );
}

/** DiffBlock shows a unified diff with added, removed and hunk lines coloured. */
export function DiffBlock(props: { text: string }) {
  const lines = props.text.replace(/\n$/, "").split("\n");
  return (
    <pre class="diff" data-diff>
      {lines.map((l, i) => {
        const cls = l.startsWith("+++") || l.startsWith("---") ? "file" : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : l.startsWith("@@") ? "hunk" : "";
        return (
          <span key={i} class={cls}>
            {l}
            {"\n"}
          </span>
        );
      })}
    </pre>
  );
}

/** matchesEventFilter applies the events page's URL filters to a live event. */
export function matchesEventFilter(ev: HubEvent, f: Record<string, string>): boolean {
  if (f.kind) {
    const kinds = f.kind
      .split(",")
      .map((k) => k.trim())
      .filter(Boolean);
    if (kinds.length && !kinds.includes(ev.kind)) return false;
  }
  for (const k of ["node_id", "resource_id", "operation_id", "correlation_id"] as const) {
    if (f[k] && ev[k] !== f[k]) return false;
  }
  return true;
}
