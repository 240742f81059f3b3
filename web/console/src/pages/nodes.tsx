// Nodes: the fleet's nodes (registered ones, and ones known only from a
// desired state), paged and filtered by the Hub; and one node: its facts,
// drain and maintenance, its streams, its recent operations and its
// throughput.

import type { ComponentChildren } from "preact";
import { ApiError, call, enc, get, url, type Page } from "../api";
import { useHistory } from "../metrics";
import type { PageDef, PageProps } from "../page";
import { href, navigate } from "../router";
import type { HubEvent, NodeView, Operation, StreamView } from "../types";
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
  Time,
  duration,
  num,
  pageOf,
  useAction,
  useResource,
} from "../ui";
import { nodeHref, streamColumns, streamHref, streamKey } from "./streams";

const PAGE_SIZE = 50;

/** NodeJob is what a node's page shows of each of its jobs. */
interface NodeJob {
  id: string;
  version: number;
  desired: { state: string };
  observed?: { state: string };
  convergence: string;
}
const STATUSES = ["online", "unavailable", "unknown"];
const MODES = ["active", "draining", "maintenance"];

/** nodeEvent: events that change what the nodes list shows (status, mode, counts). */
function nodeEvent(ev: HubEvent): boolean {
  return ev.kind.startsWith("node_") || ev.kind.startsWith("command_") || ev.kind === "intent_accepted" || ev.kind === "operation_cancelled" || ev.kind === "stream_state_changed";
}

function Nodes(props: PageProps) {
  const q = props.query;
  const status = q.get("status") ?? "";
  const mode = q.get("mode") ?? "";
  const page = pageOf(q);
  const query = { status, mode, page, page_size: PAGE_SIZE };
  const res = useResource((s) => get<Page<NodeView>>("/nodes", query, s), JSON.stringify(query), nodeEvent);
  return (
    <>
      <PageHeader title="Nodes" sub="The Agents registered with this Hub, and nodes known only from a desired state. Live." />
      <Filters>
        <SelectFilter name="status" label="Status" value={status} options={STATUSES} />
        <SelectFilter name="mode" label="Mode" value={mode} options={MODES} />
      </Filters>
      <Loaded
        res={res}
        empty={(p) =>
          p.total === 0 ? (
            status || mode ? (
              <>
                No node matches these filters. <a href={href("/nodes")}>Show every node.</a>
              </>
            ) : (
              <>
                No node yet. Start an Agent whose configuration points at this Hub: <code>health_check.hub_urls</code> with this Hub's URL,{" "}
                <code>health_check.node_id</code>, and <code>health_check.node_token</code> set to the Hub's <code>SVC_NODE_TOKEN</code>; it registers and
                shows up here.
              </>
            )
          ) : null
        }
      >
        {(p) => (
          <>
            <Table
              name="nodes"
              caption="Nodes"
              rows={p.items}
              rowKey={(n) => n.node_id}
              columns={[
                { key: "node", label: "Node", render: (n) => <a href={nodeHref(n.node_id)}>{n.node_id}</a> },
                { key: "status", label: "Status", render: (n) => <Badge value={n.status} /> },
                { key: "mode", label: "Mode", render: (n) => <Badge value={n.mode} /> },
                { key: "version", label: "Version", render: (n) => n.version ?? "" },
                {
                  key: "streams",
                  label: "Streams",
                  class: "num",
                  render: (n) => <a href={href("/streams", { node_id: n.node_id })} title={`Streams of ${n.node_id}`}>{num(n.streams ?? 0)}</a>,
                },
                { key: "config_version", label: "Config version", render: (n) => <ConfigVersion node={n} /> },
                { key: "last_report", label: "Last report", render: (n) => <Time at={n.last_report_at} /> },
                { key: "queued", label: "Queued", class: "num", render: (n) => num(n.queued_commands ?? 0) },
                { key: "in_flight", label: "In flight", class: "num", render: (n) => num(n.in_flight ?? 0) },
              ]}
            />
            <Pager page={p.page} pageSize={p.page_size} total={p.total} />
          </>
        )}
      </Loaded>
    </>
  );
}

// ---------------------------------------------------------------- detail

function NodeDetail(props: PageProps) {
  const id = props.params.node_id;
  const path = "/nodes/" + enc(id);
  const mine = (ev: HubEvent) => ev.node_id === id || ev.resource_id === id;
  const node = useResource((s) => get<NodeView>(path, undefined, s), path, mine);
  const page = pageOf(props.query);
  const streamsQuery = { node_id: id, page, page_size: PAGE_SIZE };
  const streams = useResource((s) => get<Page<StreamView>>("/streams", streamsQuery, s), JSON.stringify(streamsQuery), mine);
  const ops = useResource((s) => get<Page<Operation>>("/operations", { node_id: id, page_size: 10 }, s), "ops " + path, mine);
  const jobs = useResource((s) => get<Page<NodeJob>>("/jobs", { node_id: id, page_size: PAGE_SIZE }, s), "jobs " + path, mine);
  const rates = useHistory(path + "/history", { received: "received", sent: "sent", errors: "errors" });
  const action = useAction();
  const setMode = (method: "POST" | "DELETE", route: string) =>
    action.run(async () => {
      const r = await call<NodeView>(url(path + route), { method });
      node.reload();
      return <ModeResult node={r.body} />;
    });
  const mode = node.data?.mode;
  const status = node.data?.status;
  // Forget: a registered node leaves the registry (forced while online:
  // its Agent registers again as a new node). A node known only from
  // desired state (never registered, e.g. a typo'd id) goes when nothing
  // is desired of it any more: every stream's desired state is deleted
  // first (Stop managing), then the registry entry, if any.
  const forget = () =>
    action.run(async () => {
      let unmanaged = 0;
      if (status === "unknown") {
        for (let i = 0; i < 20; i++) {
          const p = await get<Page<StreamView>>("/streams", { node_id: id, page_size: 100 });
          const managed = p.items.filter((s) => s.desired);
          if (managed.length === 0) break;
          for (const s of managed) {
            try {
              await call<unknown>(url(path + "/streams/" + enc(s.id) + "/desired-state"), { method: "DELETE" });
              unmanaged++;
            } catch (e) {
              if (!(e instanceof ApiError && e.status === 404)) throw e;
            }
          }
        }
      }
      try {
        await call<unknown>(url(path, { force: status === "online" ? "true" : undefined }), { method: "DELETE" });
      } catch (e) {
        // A node never registered has no registry entry: with its streams
        // unmanaged it is gone already.
        if (!(e instanceof ApiError && e.status === 404 && status === "unknown")) throw e;
      }
      navigate("/nodes");
      return `Forgot node ${id}${unmanaged ? `; stopped managing ${unmanaged} stream(s)` : ""}.`;
    });
  return (
    <>
      <PageHeader
        title={
          <>
            Node <span class="mono">{id}</span>
          </>
        }
        sub={
          node.data ? (
            <span class="node-state">
              <Badge value={node.data.status} />{" "}
              <span data-mode={node.data.mode}>
                <Badge value={node.data.mode} />
              </span>{" "}
              {node.data.version ? <span class="muted">version {node.data.version}</span> : null}
            </span>
          ) : undefined
        }
      >
        <Confirm label="Drain" danger title={`Drain ${id}?`} disabled={action.busy || !node.data || mode !== "active"} onConfirm={() => void setMode("POST", "/drain")} confirmLabel="Drain">
          The Hub stops dispatching new commands to <strong>{id}</strong>; commands already in flight run to their outcome and desired state is left
          alone. New writes are accepted and wait (blocked) until the node is active again.
        </Confirm>
        <Confirm
          label="Maintenance on"
          danger
          title={`Put ${id} in maintenance?`}
          disabled={action.busy || !node.data || mode === "maintenance"}
          onConfirm={() => void setMode("POST", "/maintenance")}
          confirmLabel="Maintenance on"
        >
          The node goes into maintenance: no new command is dispatched to it; work in flight goes on and desired state is untouched.
        </Confirm>
        {mode && mode !== "active" ? (
          <Confirm
            label={mode === "draining" ? "Undrain" : "Maintenance off"}
            title={`Make ${id} active again?`}
            disabled={action.busy}
            onConfirm={() => void setMode("DELETE", "/maintenance")}
            confirmLabel="Make active"
          >
            The node becomes <strong>active</strong> again (this ends a drain or maintenance) and the Hub resumes dispatching the commands waiting for it.
          </Confirm>
        ) : null}
        <Confirm label="Forget node" danger title={`Forget ${id}?`} disabled={action.busy || !node.data} onConfirm={() => void forget()} confirmLabel="Forget">
          {status === "unknown" ? (
            <>
              <strong>{id}</strong> never registered: the Hub knows it only from desired state. Forgetting it deletes the desired state of each of its
              streams (Stop managing; the pending operations are superseded), so the node leaves every list.
            </>
          ) : status === "online" ? (
            <>
              <strong>{id}</strong> is online: forgetting it anyway ends its session at once, and its Agent registers again as a new node. Its desired
              state stays.
            </>
          ) : (
            <>
              The Hub forgets <strong>{id}</strong>: its registration, identity binding and observations go. Its desired state stays (the node shows as
              unknown while it has some); an Agent with this id registers again as a new node.
            </>
          )}
        </Confirm>
      </PageHeader>
      <ActionNotice action={action} reload={node.reload} />
      <Loaded res={node}>{(n) => <NodeFacts node={n} />}</Loaded>
      <Section title="Throughput">
        <LineChart label={`Messages per second, node ${id}`} unit="msg/s" series={rates.series} windowMs={rates.windowMs} />
      </Section>
      <Section title="Streams" actions={<a href={href("/streams", { node_id: id })}>In the streams list</a>}>
        <Loaded res={streams} empty={(p) => (p.total === 0 ? "This node reports no stream, and no desired state names it." : null)}>
          {(p) => (
            <>
              <Table name="node-streams" caption={`Streams of ${id}`} rows={p.items} rowKey={streamKey} columns={streamColumns()} />
              <Pager page={p.page} pageSize={p.page_size} total={p.total} />
            </>
          )}
        </Loaded>
      </Section>
      <Section title="Jobs" actions={<a href={href("/jobs", { node_id: id })}>In the jobs list</a>}>
        <Loaded res={jobs} empty={(p) => (p.total === 0 ? "No job runs on this node." : null)}>
          {(p) => (
            <>
              <Table
                name="node-jobs"
                caption={`Jobs of ${id}`}
                rows={p.items}
                rowKey={(j) => j.id}
                columns={[
                  { key: "job", label: "Job", render: (j) => <a href={href("/jobs/" + enc(j.id))}>{j.id}</a> },
                  { key: "version", label: "Version", class: "num", render: (j) => j.version },
                  { key: "desired", label: "Desired", render: (j) => <Badge value={j.desired.state} /> },
                  { key: "observed", label: "Observed", render: (j) => (j.observed?.state ? <Badge value={j.observed.state} /> : <span class="muted">not observed</span>) },
                  { key: "convergence", label: "Convergence", render: (j) => <Badge value={j.convergence} /> },
                ]}
              />
              {p.total > p.page_size ? <p class="muted">{num(p.total)} jobs; the first {num(p.page_size)} shown.</p> : null}
            </>
          )}
        </Loaded>
      </Section>
      <Section title="Recent operations" actions={<a href={href("/operations", { node_id: id })}>All operations of this node</a>}>
        <Loaded res={ops} empty={(p) => (p.items.length === 0 ? "No operation for this node yet." : null)}>
          {(p) => (
            <Table
              name="node-operations"
              caption={`Recent operations of ${id}`}
              rows={p.items}
              rowKey={(o) => o.operation_id}
              columns={[
                { key: "operation", label: "Operation", render: (o) => <a href={href("/operations/" + o.operation_id)}>{o.operation}</a> },
                {
                  key: "resource",
                  label: "Resource",
                  render: (o) => (o.operation.startsWith("stream_") ? <a href={streamHref(o.node_id, o.resource_id)}>{o.resource_id}</a> : o.resource_id),
                },
                { key: "state", label: "State", render: (o) => <Badge value={o.state} /> },
                { key: "generation", label: "Gen", class: "num", render: (o) => o.generation ?? "" },
                { key: "failure", label: "Failure", render: (o) => o.failure?.message ?? o.failure?.code ?? "" },
                { key: "at", label: "Updated", render: (o) => <Time at={o.updated_at ?? o.created_at} /> },
              ]}
            />
          )}
        </Loaded>
      </Section>
    </>
  );
}

/** ModeResult says what a drain or maintenance change produced (the answer is the node view). */
function ModeResult(props: { node: NodeView }) {
  const n = props.node;
  let what: ComponentChildren;
  if (n.mode === "active") what = "Dispatch resumes: commands that waited for it are sent now.";
  else
    what = (
      <>
        Work in flight goes on ({num(n.in_flight ?? 0)} in flight) while new dispatch is suppressed; {num(n.queued_commands ?? 0)} queued command(s) wait until
        the node is active again (Maintenance off).
      </>
    );
  return (
    <span data-result-mode={n.mode}>
      Node {n.node_id} is now {n.mode === "maintenance" ? "in " : ""}
      <strong>{n.mode}</strong>. {what}
    </span>
  );
}

/**
 * ConfigVersion is the configuration a node runs: the Hub's version when
 * it runs a Hub apply (the same content is the same version on every
 * node), else the node's own id, said so (a local apply or its --config
 * file: the Hub's numbering does not cover it).
 */
function ConfigVersion(props: { node: NodeView }) {
  const n = props.node;
  if (!n.config_version) return <></>;
  if (n.config_source === "node") {
    return (
      <span data-config-version={n.config_version} data-config-source="node" title="The node's own version id: it does not run a configuration the Hub applied">
        node's {n.config_version}
      </span>
    );
  }
  return (
    <span data-config-version={n.config_version} data-config-source={n.config_source ?? "hub"} title={n.node_config_version ? `The Hub's version; the node's own id of it: ${n.node_config_version}` : undefined}>
      {n.config_version}
    </span>
  );
}

function NodeFacts(props: { node: NodeView }) {
  const n = props.node;
  const metrics = Object.entries(n.metrics ?? {}).sort(([a], [b]) => a.localeCompare(b));
  return (
    <div class="grid2 node-facts">
      <Section title="Facts">
        <KV
          rows={[
            ["status", <Badge value={n.status} />],
            ["mode", <Badge value={n.mode} />],
            ["version", n.version],
            ["protocol", n.protocol_version],
            ["data address", n.data_address ? <span class="mono">{n.data_address}</span> : undefined],
            ["boot id", n.boot_id ? <span class="mono">{n.boot_id}</span> : undefined],
            ["restarts", n.restarts],
            ["registered", <Time at={n.registered_at} />],
            ["last report", <Time at={n.last_report_at} />],
            ["report seq", n.report_seq],
            ["lease expiry", n.lease_expires_at ? <><Time at={n.lease_expires_at} /> <span class="muted">(TTL {duration(n.lease_ttl_ms)})</span></> : undefined],
            ["session expiry", <Time at={n.session_expires_at} />],
            [
              "configuration",
              n.config_version ? (
                <a href={href("/configuration/" + enc(n.node_id))} title="The node's configuration: desired against reported">
                  <ConfigVersion node={n} />
                </a>
              ) : (
                <a href={href("/configuration/" + enc(n.node_id))}>not reported</a>
              ),
            ],
            ["streams", <a href={href("/streams", { node_id: n.node_id })}>{num(n.streams ?? 0)}</a>],
            ["queued commands", num(n.queued_commands ?? 0)],
            ["in flight", num(n.in_flight ?? 0)],
          ]}
        />
        {n.status === "unknown" ? <p class="muted">This node never registered: the Hub knows it only from a desired state. Commands wait for it.</p> : null}
      </Section>
      <Section title="Capabilities and reported metrics">
        {n.capabilities?.length ? (
          <ul class="caps" data-field="capabilities">
            {n.capabilities.map((c) => (
              <li key={c}>
                <code>{c}</code>
              </li>
            ))}
          </ul>
        ) : (
          <p class="muted">No capability advertised.</p>
        )}
        {metrics.length ? (
          <KV rows={metrics.map(([k, v]) => [k, num(v)] as [string, ComponentChildren])} />
        ) : (
          <p class="muted">No metrics reported yet.</p>
        )}
      </Section>
    </div>
  );
}

const pages: PageDef[] = [
  { path: "/nodes", name: "nodes", title: "Nodes", nav: "Nodes", order: 1, component: Nodes },
  { path: "/nodes/:node_id", name: "node", title: "Node", component: NodeDetail },
];
export default pages;
