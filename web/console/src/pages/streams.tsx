// Streams: the fleet's streams (every desired and every reported one,
// paged and filtered by the Hub), and one stream's desired state, observed
// state and convergence side by side, with its actions, throughput and
// latest events.

import { useEffect, useState } from "preact/hooks";
import { call, enc, get, url, type Page } from "../api";
import { useHistory } from "../metrics";
import type { PageDef, PageProps } from "../page";
import { href } from "../router";
import { LiveTail } from "../tail";
import { CONVERGENCES, STREAM_STATES, type HubEvent, type Operation, type StreamView } from "../types";
import {
  ActionNotice,
  Badge,
  Confirm,
  Filters,
  KV,
  LineChart,
  Loaded,
  PageHeader,
  Pager,
  Section,
  SelectFilter,
  Table,
  TextFilter,
  Time,
  num,
  pageOf,
  useAction,
  useResource,
  who,
  type Column,
} from "../ui";

const PAGE_SIZE = 50;

/** streamHref is the stream detail route of a (node, stream) pair. */
export function streamHref(nodeID: string, id: string): string {
  return href("/nodes/" + enc(nodeID) + "/streams/" + enc(id));
}

export function nodeHref(nodeID: string): string {
  return href("/nodes/" + enc(nodeID));
}

/** streamKey is a stream's row key: node and id together are unique. */
export function streamKey(s: StreamView): string {
  return `${s.node_id}/${s.id}`;
}

/** streamEvent: events that change what a streams list shows. */
export function streamEvent(ev: HubEvent): boolean {
  return (
    ev.kind === "convergence_changed" ||
    ev.kind === "stream_state_changed" ||
    ev.kind === "intent_accepted" ||
    ev.kind.startsWith("command_") ||
    ev.kind.startsWith("node_")
  );
}

/**
 * streamColumns are the columns of every streams table (the list and a
 * node's streams); withNode drops the node column when the table is one
 * node's.
 */
export function streamColumns(withNode = true): Column<StreamView>[] {
  const cols: Column<StreamView>[] = [
    { key: "stream", label: "Stream", render: (s) => <a href={streamHref(s.node_id, s.id)}>{s.id}</a> },
    { key: "node", label: "Node", render: (s) => <a href={nodeHref(s.node_id)}>{s.node_id}</a> },
    {
      key: "desired",
      label: "Desired",
      render: (s) =>
        s.desired ? (
          <span class="gen">
            <Badge value={s.desired.state} /> <span class="muted">gen {s.desired.generation}</span>
          </span>
        ) : (
          <span class="muted" title="No desired state: the Hub only knows this stream from a report">
            none
          </span>
        ),
    },
    {
      key: "observed",
      label: "Observed",
      render: (s) =>
        s.observed?.state ? (
          <span class="gen">
            <Badge value={s.observed.state} /> <span class="muted">gen {s.observed.generation}</span>
            {s.observed.stale ? (
              <span class="stale" data-stale title="The node's report cannot be vouched for now (lease lapsed, or not reported since the Hub started)">
                stale
              </span>
            ) : null}
          </span>
        ) : (
          <span class="muted" title="No node reported this stream yet">
            not reported
          </span>
        ),
    },
    { key: "convergence", label: "Convergence", render: (s) => <ConvergenceBadge view={s} /> },
    { key: "reason", label: "Reason", render: (s) => (s.convergence_reason ? <span class="reason">{s.convergence_reason}</span> : "") },
    { key: "received", label: "Received", class: "num", render: (s) => num(s.observed?.counters?.received) },
    { key: "sent", label: "Sent", class: "num", render: (s) => num(s.observed?.counters?.sent) },
    {
      key: "errors",
      label: "Errors",
      class: "num",
      render: (s) => {
        const n = s.observed?.counters?.errors;
        return n ? <strong class="errors">{num(n)}</strong> : num(n);
      },
    },
  ];
  return withNode ? cols : cols.filter((c) => c.key !== "node");
}

/**
 * ConvergenceBadge shows a stream's convergence; a stream nobody manages
 * (no desired state; the API says unknown) reads "not managed".
 */
export function ConvergenceBadge(props: { view: StreamView }) {
  const v = props.view;
  if (!v.desired && v.convergence === "unknown") {
    return (
      <span class="badge" data-value="unknown" data-managed="false" title="No desired state: the Hub does not manage this stream (convergence unknown)">
        not managed
      </span>
    );
  }
  return <Badge value={v.convergence} />;
}

function Streams(props: PageProps) {
  const q = props.query;
  const nodeID = q.get("node_id") ?? "";
  const state = q.get("state") ?? "";
  const convergence = q.get("convergence") ?? "";
  const page = pageOf(q);
  const query = { node_id: nodeID, state, convergence, page, page_size: PAGE_SIZE };
  const res = useResource((s) => get<Page<StreamView>>("/streams", query, s), JSON.stringify(query), streamEvent);
  const filtered = nodeID || state || convergence;
  return (
    <>
      <PageHeader title="Streams" sub="Every stream the Hub wants somewhere or a node reports: desired against observed, and whether they agree. Live." />
      <Filters>
        <TextFilter name="node_id" label="Node" value={nodeID} placeholder="node id" />
        <SelectFilter name="state" label="Observed state" value={state} options={[...STREAM_STATES, "none"]} />
        <SelectFilter name="convergence" label="Convergence" value={convergence} options={CONVERGENCES} />
      </Filters>
      <Loaded
        res={res}
        empty={(p) =>
          p.total === 0 ? (
            filtered ? (
              <>
                No stream matches these filters. <a href={href("/streams")}>Show every stream.</a>
              </>
            ) : (
              <>
                No stream yet. Streams appear when a node reports them (start an Agent with <code>health_check.hub_urls</code> pointing at this Hub) or when
                a desired state is written with <code>PUT /nodes/&lt;node&gt;/streams/&lt;id&gt;/desired-state</code>.
              </>
            )
          ) : null
        }
      >
        {(p) => (
          <>
            <Table name="streams" caption="Streams" rows={p.items} rowKey={streamKey} columns={streamColumns()} />
            <Pager page={p.page} pageSize={p.page_size} total={p.total} />
          </>
        )}
      </Loaded>
    </>
  );
}

// ---------------------------------------------------------------- detail

interface StreamLoad {
  view: StreamView;
  etag: string | null;
}

/** WriteReply is the 202 of every stream write. */
interface WriteReply {
  operation_id: string;
  node_id: string;
  stream_id: string;
  generation: number;
  desired_state: string;
  config_version?: string;
  action_id?: string;
  convergence: string;
  node_status: string;
  warnings?: { code: string; message: string }[];
}

function StreamDetail(props: PageProps) {
  const nodeID = props.params.node_id;
  const id = props.params.id;
  const path = "/nodes/" + enc(nodeID) + "/streams/" + enc(id);
  const mine = (ev: HubEvent) => ev.node_id === nodeID && (ev.resource_id === id || ev.kind.startsWith("node_"));
  // The ETag is the one of the last successful GET: a write from a view
  // that someone else changed since answers 412, never overwrites. A stream
  // nobody desired yet has no ETag: its generation is 0, and a write that
  // finds one made meanwhile must fail the same way.
  const res = useResource(
    async (signal) => {
      const r = await call<StreamView>(url(path), { signal });
      return { view: r.body, etag: r.etag ?? `"generation-${r.body.desired?.generation ?? 0}"` } as StreamLoad;
    },
    path,
    mine,
  );
  const events = useResource(
    (s) => get<Page<HubEvent>>("/events", { node_id: nodeID, resource_id: id, page_size: 10 }, s),
    "events " + path,
    (ev) => ev.node_id === nodeID && ev.resource_id === id,
  );
  const rates = useHistory(path + "/history", { received: "received", sent: "sent", errors: "errors" });
  const action = useAction();
  // awaited is the generation of the last write accepted here, until the
  // stream converges at it: then its "Convergence pending" notice ends.
  const [awaited, setAwaited] = useState<number | null>(null);
  useEffect(() => {
    const v = res.data?.view;
    if (awaited === null || !v || (v.desired?.generation ?? 0) < awaited || v.convergence !== "in_sync") return;
    setAwaited(null);
    action.settle(
      <span data-converged={awaited}>
        Converged: {id} on {nodeID} is in_sync at generation {awaited}.
      </span>,
    );
  }, [res.data, awaited]);

  const write = (label: string, send: (etag: string | undefined) => Promise<WriteReply>) =>
    action.run(async () => {
      const r = await send(res.data?.etag ?? undefined);
      setAwaited(r.generation);
      res.reload();
      events.reload();
      return <Accepted label={label} reply={r} />;
    });
  const setState = (state: "running" | "stopped") =>
    write(state === "running" ? "Start" : "Stop", async (ifMatch) => (await call<WriteReply>(url(path + "/desired-state"), { method: "PUT", body: { state }, ifMatch })).body);
  const restart = () => write("Restart", async (ifMatch) => (await call<WriteReply>(url(path + "/actions/restart"), { method: "POST", ifMatch })).body);
  const unmanage = () =>
    action.run(async () => {
      await call<unknown>(url(path + "/desired-state"), { method: "DELETE", ifMatch: res.data?.etag ?? undefined });
      res.reload();
      events.reload();
      return (
        <span data-result="unmanaged">
          The Hub no longer manages {id} on {nodeID}: its desired state is deleted and its convergence is unknown. What the node reports of it stays visible.
        </span>
      );
    });
  const desired = res.data?.view.desired;

  return (
    <>
      <PageHeader
        title={
          <>
            Stream <span class="mono">{id}</span>
          </>
        }
        sub={
          <>
            on node <a href={nodeHref(nodeID)}>{nodeID}</a> · <a href={href("/streams", { node_id: nodeID })}>all streams of this node</a>
          </>
        }
      >
        <Confirm label="Start" title={`Start ${id} on ${nodeID}?`} disabled={action.busy || !res.data || desired?.state === "running"} onConfirm={() => void setState("running")} confirmLabel="Start">
          The desired state becomes <strong>running</strong> (a new generation). The node starts the stream when it pulls the command; convergence follows its
          next report.
        </Confirm>
        <Confirm label="Stop" danger title={`Stop ${id} on ${nodeID}?`} disabled={action.busy || !res.data || desired?.state === "stopped"} onConfirm={() => void setState("stopped")} confirmLabel="Stop">
          The desired state becomes <strong>stopped</strong>: the node stops the stream and it stays stopped until someone starts it again.
        </Confirm>
        <Confirm label="Restart" title={`Restart ${id} on ${nodeID}?`} disabled={action.busy || !res.data} onConfirm={() => void restart()} confirmLabel="Restart">
          The node stops and starts the stream once; it converges when a report carries this restart's action id.
        </Confirm>
        <Confirm label="Stop managing" danger title={`Stop managing ${id} on ${nodeID}?`} disabled={action.busy || !desired} onConfirm={() => void unmanage()} confirmLabel="Stop managing">
          The Hub deletes this stream's desired state: its pending operations are superseded and never sent, and its convergence becomes unknown
          (&ldquo;not managed&rdquo;). The node is not told to stop anything. Use it for a stream written to a wrong node or id; Start or Stop manages it again.
        </Confirm>
      </PageHeader>
      <ActionNotice action={action} reload={res.reload} />
      <Loaded res={res}>{(d) => <StreamFacts view={d.view} />}</Loaded>
      <Section title="Configuration">
        <Loaded res={res}>{(d) => <StreamDefinition view={d.view} />}</Loaded>
      </Section>
      <Section title="Throughput">
        <LineChart label={`Messages per second, ${id} on ${nodeID}`} unit="msg/s" series={rates.series} windowMs={rates.windowMs} />
      </Section>
      <LiveTail path={path} what={`${id} on ${nodeID}, after its last processor`} />
      <Section title="Latest events" actions={<a href={href("/events", { node_id: nodeID, resource_id: id })}>All events of this stream</a>}>
        <Loaded res={events} empty={(p) => (p.items.length === 0 ? "No event about this stream in the Hub's retained log yet." : null)}>
          {(p) => <EventsTable rows={p.items} />}
        </Loaded>
      </Section>
    </>
  );
}

/** StreamDefinition is the stream's section of its node's configuration, as the Hub masks it. */
function StreamDefinition(props: { view: StreamView }) {
  const c = props.view.configuration;
  if (!c) {
    return (
      <p class="muted">
        The node runs a configuration of its own (its --config file or a local apply), not one the Hub applied: the Hub does not hold its text. See{" "}
        <a href={href("/configuration/" + enc(props.view.node_id))}>the node's configuration</a>.
      </p>
    );
  }
  return (
    <>
      <p class="muted">
        As defined in version <a href={href("/configuration/" + enc(props.view.node_id))}>{c.config_version}</a>, literal credentials masked, secret references as written.
      </p>
      <pre data-field="stream-configuration">{JSON.stringify(c.definition, null, 2)}</pre>
    </>
  );
}

/** Accepted says what a stream write produced: the operation, and where to watch it. */
function Accepted(props: { label: string; reply: WriteReply }) {
  const r = props.reply;
  return (
    <span data-accepted={r.operation_id}>
      {props.label} accepted: operation <a href={href("/operations/" + r.operation_id)}>{r.operation_id}</a>, generation {r.generation}, desired{" "}
      {r.desired_state}. Convergence pending → watch it here.
      {r.node_status !== "online" ? ` The node is ${r.node_status}: the command waits until it comes back.` : ""}
      {(r.warnings ?? []).map((w) => (
        <span key={w.code}> {w.message}</span>
      ))}
    </span>
  );
}

function StreamFacts(props: { view: StreamView }) {
  const v = props.view;
  const d = v.desired;
  const o = v.observed;
  const op = v.latest_operation;
  return (
    <>
      <div class="side-by-side">
        <section class="card" data-side="desired">
          <h2>Desired</h2>
          {d ? (
            <KV
              rows={[
                ["state", <Badge value={d.state} />],
                ["generation", d.generation],
                ["config version", d.config_version],
                ["action id", d.action_id ? <span class="mono">{d.action_id}</span> : undefined],
              ]}
            />
          ) : (
            <p class="muted">No desired state: the Hub knows this stream only from the node's report. Start or Stop sets one.</p>
          )}
        </section>
        <section class="card" data-side="observed">
          <h2>Observed {o?.stale ? <span class="stale" data-stale>stale</span> : null}</h2>
          {o?.state ? (
            <KV
              rows={[
                ["state", <Badge value={o.state} />],
                ["generation", o.generation],
                ["config version", o.config_version],
                ["action id", o.action_id ? <span class="mono">{o.action_id}</span> : undefined],
                ["reported", <Time at={o.reported_at} />],
                ["received", num(o.counters?.received)],
                ["sent", num(o.counters?.sent)],
                ["errors", num(o.counters?.errors)],
                ["dropped", num(o.counters?.dropped)],
                ["retries", num(o.counters?.retries)],
                ["in flight", num(o.counters?.in_flight)],
              ]}
            />
          ) : (
            <p class="muted">Not reported yet: the node has not reported this stream (it may be offline, or not run it yet).</p>
          )}
        </section>
        <section class="card" data-side="convergence">
          <h2>Convergence</h2>
          <p class="convergence" data-convergence={v.convergence}>
            <ConvergenceBadge view={v} />
          </p>
          {v.convergence_reason ? (
            <p>
              reason: <span class="reason">{v.convergence_reason}</span>
            </p>
          ) : null}
          <p class="muted">{explain(v)}</p>
        </section>
      </div>
      {o?.last_error ? (
        <div class="notice error" data-field="last_error">
          <span>
            Last error{o.last_error_at ? <> (<Time at={o.last_error_at} />)</> : null}: {o.last_error}
          </span>
        </div>
      ) : null}
      <Section title="Latest operation" actions={<a href={href("/operations", { node_id: v.node_id, resource_id: v.id })}>All operations of this stream</a>}>
        {op ? <OperationFacts op={op} /> : <p class="muted">No operation yet: nobody wrote a desired state for this stream through the Hub.</p>}
      </Section>
    </>
  );
}

function explain(v: StreamView): string {
  switch (v.convergence) {
    case "in_sync":
      return "The node reports the desired state at the desired generation.";
    case "pending":
      return "Accepted by the Hub, waiting to be dispatched to the node.";
    case "applying":
      return "Dispatched to the node; waiting for a report that shows it done.";
    case "degraded":
      return "The node reports a problem or the command is being retried.";
    case "blocked":
      return "Cannot proceed without a change (node draining or in maintenance, expired intent, permanent failure).";
    default:
      return v.desired ? "The Hub cannot vouch for the node's report now." : "Not managed: nobody wrote a desired state for this stream (or it was deleted); the Hub only shows the node's report.";
  }
}

export function OperationFacts(props: { op: Operation }) {
  const op = props.op;
  return (
    <KV
      rows={[
        ["operation", <a href={href("/operations/" + op.operation_id)}>{op.operation}</a>],
        ["operation id", <a href={href("/operations/" + op.operation_id)} class="mono">{op.operation_id}</a>],
        ["state", <Badge value={op.state} />],
        ["generation", op.generation],
        ["retries", op.retry?.count],
        ["failure", op.failure ? [op.failure.code, op.failure.message].filter(Boolean).join(": ") : undefined],
        ["actor", who(op)],
        ["created", <Time at={op.created_at} />],
        ["updated", <Time at={op.updated_at} />],
      ]}
    />
  );
}

export function EventsTable(props: { rows: HubEvent[] }) {
  return (
    <Table
      name="events"
      rows={props.rows}
      rowKey={(e) => String(e.id)}
      columns={[
        { key: "at", label: "When", render: (e) => <Time at={e.occurred_at} /> },
        { key: "kind", label: "Kind", render: (e) => e.kind.replace(/_/g, " ") },
        { key: "outcome", label: "Outcome", render: (e) => (e.outcome ? <Badge value={e.outcome} /> : "") },
        { key: "message", label: "Message", render: (e) => e.message ?? "" },
        {
          key: "operation",
          label: "Operation",
          render: (e) => (e.operation_id ? <a href={href("/operations/" + e.operation_id)} class="mono">{e.operation_id.slice(0, 13)}…</a> : ""),
        },
      ]}
    />
  );
}

const pages: PageDef[] = [
  { path: "/streams", name: "streams", title: "Streams", nav: "Streams", order: 2, component: Streams },
  { path: "/nodes/:node_id/streams/:id", name: "stream", title: "Stream", component: StreamDetail },
];
export default pages;
