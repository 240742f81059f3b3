// Operations: every intent the Hub accepted (a desired-state write, a
// restart, a job or configuration command), newest first, and the detail of
// one with its attempts as the event log tells them, its retry, failure,
// result and the cancel of a pending one.

import { call, enc, get, url, type Page } from "../api";
import { DiffBlock, JSONBlock, NodeLink, operationResourceType, ResourceLink, shortID } from "../oplog";
import type { PageDef, PageProps } from "../page";
import { href } from "../router";
import type { HubEvent, Operation } from "../types";
import { OPERATION_STATES } from "../types";
import {
  ActionNotice,
  Badge,
  Confirm,
  Filters,
  KV,
  Loaded,
  num,
  PageHeader,
  Pager,
  pageOf,
  Section,
  SelectFilter,
  Table,
  TextFilter,
  Time,
  useAction,
  useResource,
  who,
  type Resource,
} from "../ui";

const PAGE_SIZE = 50;

const LIST_KINDS = new Set(["intent_accepted", "operation_cancelled", "convergence_changed"]);
const listLive = (ev: HubEvent) => LIST_KINDS.has(ev.kind) || ev.kind.startsWith("command_");

const FILTERS = ["state", "operation", "node_id", "resource_id", "correlation_id"] as const;

function Operations(props: PageProps) {
  const q = props.query;
  const page = pageOf(q);
  const f: Record<string, string> = {};
  for (const k of FILTERS) f[k] = q.get(k) ?? "";
  const filtered = FILTERS.some((k) => f[k]);
  const res = useResource((s) => get<Page<Operation>>("/operations", { ...f, page, page_size: PAGE_SIZE }, s), JSON.stringify([f, page]), listLive);
  return (
    <>
      <PageHeader
        title="Operations"
        sub="Every write the Hub accepted, newest first: what was asked, where it stands, and whether the node converged. Live."
      />
      <Filters>
        <SelectFilter name="state" label="State" value={f.state} options={OPERATION_STATES} />
        <TextFilter name="operation" label="Operation" value={f.operation} placeholder="stream_desired_state" />
        <TextFilter name="node_id" label="Node" value={f.node_id} />
        <TextFilter name="resource_id" label="Resource" value={f.resource_id} />
        <TextFilter name="correlation_id" label="Correlation id" value={f.correlation_id} />
        {filtered ? (
          <a class="clear-filters" href={href("/operations")}>
            Clear filters
          </a>
        ) : null}
      </Filters>
      <Loaded
        res={res}
        empty={(p) =>
          p.items.length === 0
            ? filtered
              ? "No operation matches these filters."
              : "No operation yet. Writing a stream's desired state, restarting it, or changing a node's configuration creates one."
            : null
        }
      >
        {(p) => (
          <>
            <Table
              name="operations"
              caption="Operations"
              rows={p.items}
              rowKey={(o) => o.operation_id}
              columns={[
                {
                  key: "operation",
                  label: "Operation",
                  render: (o) => (
                    <>
                      <a href={href("/operations/" + enc(o.operation_id))}>{o.operation}</a>
                      <div class="muted mono small" title={o.operation_id}>
                        {shortID(o.operation_id)}
                      </div>
                    </>
                  ),
                },
                { key: "state", label: "State", render: (o) => <Badge value={o.state} /> },
                { key: "convergence", label: "Convergence", render: (o) => (o.convergence ? <Badge value={o.convergence} /> : <span class="muted">—</span>) },
                { key: "node", label: "Node", render: (o) => <NodeLink id={o.node_id} /> },
                {
                  key: "resource",
                  label: "Resource",
                  render: (o) => <ResourceLink type={operationResourceType(o.operation, o.resource_id)} id={o.resource_id} node={o.node_id} />,
                },
                { key: "generation", label: "Gen.", class: "num", render: (o) => num(o.generation) },
                { key: "retries", label: "Retries", class: "num", render: (o) => num(o.retry?.count ?? 0) },
                { key: "failure", label: "Failure", render: (o) => <FailureCell failure={o.failure} /> },
                { key: "actor", label: "Actor", render: (o) => who(o) },
                { key: "created", label: "Created", render: (o) => <Time at={o.created_at} /> },
              ]}
            />
            <Pager page={p.page} pageSize={p.page_size} total={p.total} />
          </>
        )}
      </Loaded>
    </>
  );
}

function FailureCell(props: { failure: Operation["failure"] }) {
  const f = props.failure;
  if (!f || (!f.code && !f.message)) return <span class="muted">—</span>;
  return (
    <span class="failure">
      {f.code ? <code>{f.code}</code> : null}
      {f.code && f.message ? " " : null}
      {f.message ? <span>{f.message}</span> : null}
    </span>
  );
}

// ---------------------------------------------------------------- detail

/** Attempt is one dispatch of an operation, put together from its events. */
interface Attempt {
  id: string;
  dispatched?: string;
  acknowledged?: string;
  outcome?: string;
  outcomeAt?: string;
  failureCode?: string;
  message?: string;
}

function attemptsOf(events: HubEvent[]): Attempt[] {
  const by = new Map<string, Attempt>();
  for (const ev of events) {
    const id = typeof ev.data?.attempt_id === "string" ? ev.data.attempt_id : "";
    if (!id) continue;
    let a = by.get(id);
    if (!a) {
      a = { id };
      by.set(id, a);
    }
    if (ev.kind === "command_dispatched") a.dispatched = ev.occurred_at;
    else if (ev.kind === "command_acknowledged") a.acknowledged = ev.occurred_at;
    else if (ev.kind === "command_succeeded" || ev.kind === "command_failed" || ev.kind === "command_timed_out") {
      a.outcome = ev.kind.replace("command_", "");
      a.outcomeAt = ev.occurred_at;
      if (typeof ev.data?.failure_code === "string") a.failureCode = ev.data.failure_code;
      if (ev.message) a.message = ev.message;
    }
  }
  return [...by.values()];
}

function eventDetail(ev: HubEvent): string {
  const d = ev.data ?? {};
  const parts: string[] = [];
  if (ev.kind === "convergence_changed") {
    parts.push(d.previous ? `${d.previous} → ${d.convergence ?? "?"}` : `now ${d.convergence ?? "?"}`);
    if (d.reason) parts.push(`reason ${d.reason}`);
    return parts.join(" · ");
  } else {
    if (d.desired_state) parts.push(`desired ${d.desired_state}`);
    if (d.generation !== undefined) parts.push(`generation ${d.generation}`);
    if (d.failure_code) parts.push(`failure ${d.failure_code}`);
    if (d.attempt_id) parts.push(`attempt ${shortID(String(d.attempt_id))}`);
  }
  if (ev.message) parts.push(ev.message);
  return parts.join(" · ");
}

function OperationDetail(props: PageProps) {
  const id = props.params.id;
  const mine = (ev: HubEvent) => ev.operation_id === id;
  const res = useResource((s) => get<Operation>("/operations/" + enc(id), undefined, s), "op:" + id, mine);
  const evs = useResource((s) => get<Page<HubEvent>>("/events", { operation_id: id, page_size: 100 }, s), "opev:" + id, mine);
  const action = useAction();
  const cancel = () =>
    action.run(async () => {
      let r;
      try {
        r = await call<Operation>(url("/operations/" + enc(id)), { method: "DELETE" });
      } finally {
        // Refused (409: dispatched meanwhile) or not, show where it stands now.
        res.reload();
        evs.reload();
      }
      return (
        <>
          Cancelled: the operation is now <Badge value={r.body.state} />
          {r.body.convergence ? (
            <>
              {" "}
              and the resource <Badge value={r.body.convergence} />
            </>
          ) : null}
          . Its desired state is unchanged; write it again to change it.
        </>
      );
    });
  return (
    <>
      <PageHeader
        title={res.data ? `Operation ${res.data.operation}` : "Operation"}
        sub={
          <>
            <span class="mono">{id}</span> · <a href={href("/operations")}>All operations</a>
          </>
        }
      >
        {res.data?.state === "pending" ? (
          <Confirm label="Cancel operation" title="Cancel this pending operation?" danger confirmLabel="Cancel operation" disabled={action.busy} onConfirm={cancel}>
            <p>
              The Hub will never dispatch it: cancelling suppresses work that is still pending. It never undoes a side effect already executed on a node, and the
              desired state stays as written (the resource shows <Badge value="blocked" /> until you write it again).
            </p>
            <p class="muted">If the operation has been dispatched meanwhile, the Hub refuses (409 operation_not_cancellable) and its outcome stays visible.</p>
          </Confirm>
        ) : null}
      </PageHeader>
      <ActionNotice action={action} reload={res.reload} />
      <Loaded res={res}>{(op) => <OperationBody op={op} events={evs} />}</Loaded>
    </>
  );
}

function OperationBody(props: { op: Operation; events: Resource<Page<HubEvent>> }) {
  const op = props.op;
  const rtype = operationResourceType(op.operation, op.resource_id);
  const unified = op.result && typeof op.result === "object" && typeof (op.result as { unified?: unknown }).unified === "string" ? (op.result as { unified: string }).unified : null;
  return (
    <>
      <div class="op-state" data-operation-state={op.state}>
        <Badge value={op.state} />
        {op.convergence ? (
          <span>
            convergence <Badge value={op.convergence} />
          </span>
        ) : null}
        <span class="muted">{stateMeaning(op.state)}</span>
      </div>
      <Section title="Record">
        <KV
          rows={[
            ["operation", op.operation],
            ["operation_id", <span class="mono">{op.operation_id}</span>],
            ["intent_id", <span class="mono">{op.intent_id}</span>],
            ["attempt_id", op.attempt_id ? <span class="mono">{op.attempt_id}</span> : null],
            ["state", <Badge value={op.state} />],
            ["convergence", op.convergence ? <Badge value={op.convergence} /> : null],
            ["node", <NodeLink id={op.node_id} />],
            ["resource", <ResourceLink type={rtype} id={op.resource_id} node={op.node_id} />],
            ["generation", op.generation === undefined ? null : String(op.generation)],
            ["actor", who(op)],
            [
              "correlation_id",
              op.correlation_id ? (
                <a class="mono" href={href("/operations", { correlation_id: op.correlation_id })} title="Operations of this request">
                  {op.correlation_id}
                </a>
              ) : null,
            ],
            ["created_at", stamp(op.created_at)],
            ["updated_at", stamp(op.updated_at)],
            ["dispatched_at", stamp(op.dispatched_at)],
            ["acknowledged_at", stamp(op.acknowledged_at)],
            ["finished_at", stamp(op.finished_at)],
            ["expires_at", stamp(op.expires_at)],
          ]}
        />
      </Section>
      <div class="grid2 op-grid">
        <Section title="Retry">
          <KV
            rows={[
              ["count", num(op.retry?.count ?? 0)],
              ["next_at", stamp(op.retry?.next_at)],
            ]}
          />
          {op.retry?.next_at && op.state === "pending" ? <p class="muted">The last attempt timed out; the Hub dispatches the next one after its backoff.</p> : null}
        </Section>
        <Section title="Failure">
          {op.failure && (op.failure.code || op.failure.message || op.failure.class) ? (
            <div data-failure>
              <KV
                rows={[
                  ["class", op.failure.class],
                  ["code", op.failure.code ? <code>{op.failure.code}</code> : null],
                  ["message", op.failure.message],
                ]}
              />
            </div>
          ) : (
            <p class="muted">None.</p>
          )}
        </Section>
      </div>
      <Section title="Attempts and timeline">
        <Loaded res={props.events} empty={(p) => (p.items.length === 0 ? "No event of this operation is left in the Hub's event log (it keeps the newest 2048)." : null)}>
          {(p) => {
            const asc = [...p.items].sort((a, b) => a.id - b.id);
            const attempts = attemptsOf(asc);
            return (
              <>
                {attempts.length ? (
                  <Table
                    name="operation-attempts"
                    caption="Attempts"
                    rows={attempts}
                    rowKey={(a) => a.id}
                    columns={[
                      { key: "n", label: "#", class: "num", render: (a) => String(attempts.indexOf(a) + 1) },
                      {
                        key: "attempt",
                        label: "Attempt",
                        render: (a) => (
                          <span class="mono" title={a.id}>
                            {shortID(a.id)}
                          </span>
                        ),
                      },
                      { key: "dispatched", label: "Dispatched", render: (a) => <Time at={a.dispatched} /> },
                      { key: "acknowledged", label: "Acknowledged", render: (a) => <Time at={a.acknowledged} /> },
                      { key: "outcome", label: "Outcome", render: (a) => (a.outcome ? <Badge value={a.outcome} /> : <span class="muted">in flight</span>) },
                      { key: "at", label: "At", render: (a) => <Time at={a.outcomeAt} /> },
                      { key: "failure", label: "Failure", render: (a) => [a.failureCode ? <code>{a.failureCode}</code> : null, a.message ? " " + a.message : null] },
                    ]}
                  />
                ) : (
                  <p class="muted">Never dispatched{op.state === "pending" ? " yet: the node is offline, draining, in maintenance, at capacity, or a retry is backing off." : "."}</p>
                )}
                <ol class="timeline" aria-label="Timeline">
                  {asc.map((ev) => (
                    <li key={ev.id} data-event-kind={ev.kind}>
                      <Time at={ev.occurred_at} />
                      <Badge value={ev.kind} />
                      <span>{eventDetail(ev)}</span>
                      {ev.actor ? <span class="muted">by {who(ev)}</span> : null}
                    </li>
                  ))}
                </ol>
                {p.total > p.items.length ? (
                  <p class="muted">
                    Showing the newest {p.items.length} of {p.total} events. <a href={href("/events", { operation_id: op.operation_id })}>All in the events tail</a>
                  </p>
                ) : (
                  <p class="muted">
                    <a href={href("/events", { operation_id: op.operation_id })}>Follow this operation in the events tail</a>
                  </p>
                )}
              </>
            );
          }}
        </Loaded>
      </Section>
      <div class="grid2 op-grid">
        <Section title="Result">
          {op.result === undefined || op.result === null ? (
            <p class="muted">No result: the Agent returned none{op.finished_at ? "" : " yet"}.</p>
          ) : (
            <>
              {unified ? (
                <>
                  <h3>Diff</h3>
                  <DiffBlock text={unified} />
                </>
              ) : null}
              <JSONBlock value={unified ? { ...(op.result as object), unified: "(the diff above)" } : op.result} label="Result" />
            </>
          )}
        </Section>
        <Section title="Observed">
          {op.observed === undefined || op.observed === null ? <p class="muted">Nothing observed: the node has not reported this resource.</p> : <JSONBlock value={op.observed} label="Observed" />}
        </Section>
      </div>
    </>
  );
}

function stateMeaning(s: string): string {
  switch (s) {
    case "pending":
      return "accepted, waiting for dispatch (node offline, draining, queue full, or backoff)";
    case "dispatched":
      return "an attempt is on the node's command queue";
    case "acknowledged":
      return "the Agent acknowledged the attempt (transport only)";
    case "succeeded":
      return "the Agent reported success";
    case "failed":
      return "the Agent reported failure, or the Hub gave up";
    case "timed_out":
      return "the attempt expired without an outcome";
    case "cancelled":
      return "cancelled while pending; never dispatched";
    case "superseded":
      return "a newer write for the same resource replaced it before dispatch";
  }
  return "";
}

/** stamp shows a time as "12 s ago" and the exact time; null (shown "—") when absent. */
function stamp(at: string | undefined | null) {
  if (!at) return null;
  return (
    <span>
      <Time at={at} /> <span class="muted mono small">{at}</span>
    </span>
  );
}

const pages: PageDef[] = [
  { path: "/operations", name: "operations", title: "Operations", nav: "Operations", order: 4, component: Operations },
  { path: "/operations/:id", name: "operation", title: "Operation", component: OperationDetail },
];
export default pages;
