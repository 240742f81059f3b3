// Configuration: pick a node, then its configuration as the Hub desires it
// and as the node reports it, the versions the Hub keeps for it, a line
// diff of two versions computed here, and apply / roll back of a version.
// Many nodes at once are a rollout (pages/rollouts.tsx).

import { Fragment } from "preact";
import { call, enc, get, type Page, url } from "../api";
import { diffLines } from "../diff";
import type { PageDef, PageProps } from "../page";
import { href, setQuery } from "../router";
import type { HubEvent, NodeView, Operation as _Op } from "../types";
import { ActionNotice, Badge, Confirm, Filters, KV, Loaded, PageHeader, Pager, pageOf, Section, SelectFilter, Table, Time, useAction, useResource, who } from "../ui";

export interface ConfigVersion {
  version: string;
  node_id: string;
  format: string;
  content?: string;
  sha256: string;
  source: "api" | "rollout" | string;
  rollout_id?: string;
  actor?: string;
  actor_kind?: string;
  correlation_id?: string;
  created_at: string;
  /** State of the newest recent apply of this version to the node. */
  apply_state?: string;
}

interface NodeConfiguration {
  node_id: string;
  desired: { config_version?: string; node_version?: string; generation: number; format?: string; content?: string; updated_at?: string } | null;
  reported: { node_version: string; hub_version?: string; generation?: number; reported_at?: string; stale?: boolean } | null;
  convergence: string;
  convergence_reason?: string;
  operation_id?: string;
}

const PAGE_SIZE = 20;

// ---------------------------------------------------------------- pick a node

function Configuration(p: PageProps) {
  const page = pageOf(p.query);
  const status = p.query.get("status") ?? "";
  const nodes = useResource(
    (s) => get<Page<NodeView>>("/nodes", { page, page_size: PAGE_SIZE, status }, s),
    `nodes|${page}|${status}`,
    (ev) => ev.kind === "configuration_applied" || ev.kind.startsWith("node_"),
  );
  return (
    <>
      <PageHeader
        title="Configuration"
        sub={
          <>
            Each node's configuration as the Hub keeps it: pick a node to see its versions, compare two, apply or roll back one. To change many nodes at once, wave by wave behind a
            health gate, use a <a href={href("/rollouts")}>rollout</a>.
          </>
        }
      />
      <Filters>
        <SelectFilter name="status" label="Status" value={status} options={["online", "unavailable", "unknown"]} />
      </Filters>
      <Loaded
        res={nodes}
        empty={(d) =>
          d.items.length === 0
            ? status
              ? "No node has that status."
              : "No node has registered with the Hub yet. Start an Agent with health_check.hub_urls pointing at this Hub."
            : null
        }
      >
        {(d) => (
          <>
            <Table
              name="configuration-nodes"
              rows={d.items}
              rowKey={(n) => n.node_id}
              columns={[
                { key: "node", label: "Node", render: (n) => <a href={href("/configuration/" + enc(n.node_id))}>{n.node_id}</a> },
                { key: "status", label: "Status", render: (n) => <Badge value={n.status} /> },
                { key: "mode", label: "Mode", render: (n) => <Badge value={n.mode} /> },
                { key: "config_version", label: "Running version (node's id)", render: (n) => (n.config_version ? <code>{n.config_version}</code> : <span class="muted">—</span>) },
                { key: "last_report", label: "Last report", render: (n) => <Time at={n.last_report_at} /> },
              ]}
            />
            <Pager page={d.page} pageSize={d.page_size} total={d.total} />
          </>
        )}
      </Loaded>
    </>
  );
}

// ---------------------------------------------------------------- one node

function isThisNode(id: string) {
  return (ev: HubEvent) => {
    if (ev.node_id !== id) return false;
    if (ev.kind === "configuration_applied" || ev.kind === "convergence_changed" || ev.kind === "rollout_changed") return true;
    if (ev.kind === "intent_accepted" || ev.kind.startsWith("command_")) return !ev.resource_id || ev.resource_id === "configuration";
    return false;
  };
}

function versionNumber(v: string | undefined): number {
  const m = /^v(\d+)$/.exec(v ?? "");
  return m ? Number(m[1]) : 0;
}

function NodeConfigurationPage(p: PageProps) {
  const id = p.params.node_id;
  const page = pageOf(p.query);
  const base = `/nodes/${enc(id)}/configuration`;
  const live = isThisNode(id);
  const conf = useResource(
    async (s) => {
      const r = await call<NodeConfiguration>(url(base), { signal: s });
      return { ...r.body, etag: r.etag };
    },
    "conf|" + id,
    live,
  );
  const versions = useResource((s) => get<Page<ConfigVersion>>(base + "/versions", { page, page_size: PAGE_SIZE }, s), `versions|${id}|${page}`, live);
  const action = useAction();
  const reload = () => {
    conf.reload();
    versions.reload();
  };
  const desired = conf.data?.desired?.config_version;
  const desiredN = versionNumber(desired);

  const apply = (v: string) =>
    action.run(async () => {
      const r = await call<_Op>(url(base + "/apply"), { method: "POST", body: { config_version: v }, ifMatch: conf.data?.etag ?? undefined });
      reload();
      return <OpDone verb={`Apply of ${v} accepted`} op={r.body} />;
    });
  const rollback = (v: string) =>
    action.run(async () => {
      const r = await call<_Op>(url(base + "/rollback/" + enc(v)), { method: "POST", ifMatch: conf.data?.etag ?? undefined });
      reload();
      return <OpDone verb={`Rollback to ${v} accepted`} op={r.body} />;
    });

  return (
    <>
      <PageHeader
        title={
          <>
            Configuration of <span class="mono">{id}</span>
          </>
        }
        sub={
          <>
            <a href={href("/configuration")}>All nodes</a> · <a href={href("/nodes/" + enc(id))}>Node {id}</a> · many nodes at once: <a href={href("/rollouts")}>rollouts</a>
          </>
        }
      />
      <ActionNotice action={action} reload={reload} />
      <Section title="Desired and reported">
        <Loaded res={conf}>
          {(c) => (
            <>
              <div class="grid2 config-state">
                <div>
                  <h3>Desired (the Hub)</h3>
                  {c.desired ? (
                    <KV
                      rows={[
                        ["version", c.desired.config_version ? <code>{c.desired.config_version}</code> : ""],
                        ["generation", String(c.desired.generation)],
                        ["format", c.desired.format ?? ""],
                        ["updated", <Time at={c.desired.updated_at} />],
                      ]}
                    />
                  ) : (
                    <p class="muted">The Hub desires no configuration for this node yet: it runs its own --config file.</p>
                  )}
                </div>
                <div>
                  <h3>Reported (the node)</h3>
                  {c.reported ? (
                    <KV
                      rows={[
                        ["Hub version", c.reported.hub_version ? <code>{c.reported.hub_version}</code> : ""],
                        ["node's version", c.reported.node_version ? <code>{c.reported.node_version}</code> : ""],
                        ["generation", c.reported.generation === undefined ? "" : String(c.reported.generation)],
                        ["reported", <Time at={c.reported.reported_at} />],
                        ["stale", c.reported.stale ? <Badge value="stale" title="The node's report is out of date (lease lapsed or Hub restarted)" /> : "no"],
                      ]}
                    />
                  ) : (
                    <p class="muted">The node has not reported a configuration yet.</p>
                  )}
                </div>
              </div>
              <KV
                rows={[
                  ["convergence", <Badge value={c.convergence} />],
                  ["reason", c.convergence_reason ?? ""],
                  ["latest operation", c.operation_id ? <a href={href("/operations/" + enc(c.operation_id))}>{c.operation_id}</a> : ""],
                ]}
              />
              {c.desired?.content ? (
                <details class="config-content">
                  <summary>Desired content ({c.desired.format}, literal credentials masked)</summary>
                  <pre>{c.desired.content}</pre>
                </details>
              ) : null}
            </>
          )}
        </Loaded>
      </Section>
      <Section title="Versions the Hub keeps">
        <Loaded res={versions} empty={(d) => (d.total === 0 ? "The Hub keeps no version for this node yet: apply one (POST …/configuration/apply) or include the node in a rollout." : null)}>
          {(d) => (
            <>
              <Table
                name="configuration-versions"
                rows={d.items}
                rowKey={(v) => v.version}
                columns={[
                  {
                    key: "version",
                    label: "Version",
                    render: (v) => (
                      <>
                        <code>{v.version}</code> {v.version === desired ? <Badge value="desired" title="The version the Hub desires now" /> : null}
                        {v.apply_state === "failed" ? (
                          <span data-apply-state="failed">
                            {" "}
                            <Badge value="failed" title="Its newest apply to this node failed: it is offered as no apply or rollback target" />
                          </span>
                        ) : null}
                      </>
                    ),
                  },
                  {
                    key: "source",
                    label: "Source",
                    render: (v) =>
                      v.source === "rollout" && v.rollout_id ? (
                        <>
                          rollout <a href={href("/rollouts/" + enc(v.rollout_id))}>{shortID(v.rollout_id)}</a>
                        </>
                      ) : (
                        v.source
                      ),
                  },
                  { key: "actor", label: "Actor", render: (v) => who(v) },
                  { key: "created", label: "Created", render: (v) => <Time at={v.created_at} /> },
                  { key: "sha256", label: "SHA-256", render: (v) => <code title={v.sha256}>{v.sha256.slice(0, 12)}</code> },
                  {
                    key: "diff",
                    label: "Diff",
                    render: (v) =>
                      versionNumber(v.version) > 1 ? (
                        <a href={href("/configuration/" + enc(id), { page: page > 1 ? page : undefined, from: "v" + (versionNumber(v.version) - 1), to: v.version })}>
                          vs previous
                        </a>
                      ) : (
                        <span class="muted">first</span>
                      ),
                  },
                  {
                    key: "actions",
                    label: "Actions",
                    render: (v) =>
                      v.version === desired ? (
                        <span class="muted">desired now</span>
                      ) : v.apply_state === "failed" ? (
                        <span class="muted" data-no-target>
                          its apply failed: see its operation
                        </span>
                      ) : (
                        <div class="actions">
                          <Confirm label="Apply version" title={`Apply ${v.version} to ${id}?`} disabled={action.busy || !conf.data} onConfirm={() => void apply(v.version)}>
                            <p>
                              The Hub makes <code>{v.version}</code> the desired configuration of <strong>{id}</strong> (a new generation) and sends it to the node, which restarts only
                              the streams and jobs the change touches.
                            </p>
                          </Confirm>
                          {desiredN && versionNumber(v.version) < desiredN ? (
                            <Confirm
                              label={`Roll back to ${v.version}`}
                              title={`Roll back ${id} to ${v.version}?`}
                              danger
                              disabled={action.busy || !conf.data}
                              onConfirm={() => void rollback(v.version)}
                            >
                              <p>
                                The node's desired configuration becomes the earlier <code>{v.version}</code> again (now <code>{desired}</code>). No version is deleted.
                              </p>
                            </Confirm>
                          ) : null}
                        </div>
                      ),
                  },
                ]}
              />
              <Pager page={d.page} pageSize={d.page_size} total={d.total} />
            </>
          )}
        </Loaded>
      </Section>
      <DiffSection id={id} query={p.query} live={live} />
    </>
  );
}

function shortID(id: string): string {
  return id.length > 13 ? "…" + id.slice(-12) : id;
}

function OpDone(props: { verb: string; op: _Op }) {
  return (
    <>
      {props.verb}: operation <a href={href("/operations/" + enc(props.op.operation_id))}>{props.op.operation_id}</a> (generation {props.op.generation ?? "—"},{" "}
      {props.op.state}).
    </>
  );
}

// ---------------------------------------------------------------- diff

interface DiffData {
  newest: number;
  from: ConfigVersion | null;
  to: ConfigVersion | null;
}

/**
 * fetchVersion reads one version by its place in the newest-first list:
 * the Hub numbers a node's versions v1, v2, ..., so vK of a node whose
 * newest is vN is page N-K+1 at page_size 1 (checked, never guessed).
 */
async function fetchVersion(base: string, newest: number, v: string, s: AbortSignal): Promise<ConfigVersion | null> {
  const k = versionNumber(v);
  if (!k || k > newest) return null;
  const r = await get<Page<ConfigVersion>>(base + "/versions", { page: newest - k + 1, page_size: 1 }, s);
  const it = r.items[0];
  return it && it.version === v ? it : null;
}

function DiffSection(props: { id: string; query: URLSearchParams; live: (ev: HubEvent) => boolean }) {
  const base = `/nodes/${enc(props.id)}/configuration`;
  const qFrom = props.query.get("from") ?? "";
  const qTo = props.query.get("to") ?? "";
  const res = useResource<DiffData>(
    async (s) => {
      const head = await get<Page<ConfigVersion>>(base + "/versions", { page: 1, page_size: 1 }, s);
      const newest = versionNumber(head.items[0]?.version);
      if (!newest) return { newest: 0, from: null, to: null };
      const toV = qTo || "v" + newest;
      const fromV = qFrom || (versionNumber(toV) > 1 ? "v" + (versionNumber(toV) - 1) : "");
      const [from, to] = await Promise.all([fromV ? fetchVersion(base, newest, fromV, s) : null, fetchVersion(base, newest, toV, s)]);
      return { newest, from, to };
    },
    `diff|${props.id}|${qFrom}|${qTo}`,
    (ev) => props.live(ev) && (ev.kind === "intent_accepted" || ev.kind === "configuration_applied"),
  );
  const keepPage = { page: props.query.get("page") ?? undefined };
  return (
    <Section title="Compare two versions">
      <Loaded res={res} empty={(d) => (d.newest === 0 ? "No version to compare yet." : d.newest === 1 ? "Only one version so far (v1): nothing to compare it with." : null)}>
        {(d) => {
          const options = versionOptions(d.newest);
          const fromV = d.from?.version ?? qFrom;
          const toV = d.to?.version ?? qTo;
          return (
            <div class="config-diff">
              <form class="filters" onSubmit={(e) => e.preventDefault()}>
                <label>
                  From
                  <select name="from" value={fromV} onChange={(e) => setQuery({ ...keepPage, from: (e.currentTarget as HTMLSelectElement).value })}>
                    {options.map((o) => (
                      <option key={o} value={o}>
                        {o}
                      </option>
                    ))}
                  </select>
                </label>
                <label>
                  To
                  <select name="to" value={toV} onChange={(e) => setQuery({ ...keepPage, to: (e.currentTarget as HTMLSelectElement).value })}>
                    {options.map((o) => (
                      <option key={o} value={o}>
                        {o}
                      </option>
                    ))}
                  </select>
                </label>
                {qFrom || qTo ? (
                  <button type="button" class="ghost" onClick={() => setQuery({ ...keepPage, from: undefined, to: undefined })}>
                    Previous vs newest
                  </button>
                ) : null}
              </form>
              {!d.from || !d.to ? (
                <p class="muted" data-state="error">
                  {!d.from ? `No version ${fromV || "(none)"} for this node.` : `No version ${toV} for this node.`}
                </p>
              ) : (
                <DiffView from={d.from} to={d.to} />
              )}
            </div>
          );
        }}
      </Loaded>
    </Section>
  );
}

/** versionOptions lists vN down to v1 (the newest 500 at most, so a long history stays a usable select). */
function versionOptions(newest: number): string[] {
  const out: string[] = [];
  for (let k = newest; k >= 1 && out.length < 500; k--) out.push("v" + k);
  return out;
}

function DiffView(props: { from: ConfigVersion; to: ConfigVersion }) {
  const { from, to } = props;
  if (from.content === undefined || to.content === undefined) return <p class="muted">The Hub did not return the content of these versions.</p>;
  const r = diffLines(from.content, to.content);
  if (r.tooLarge) {
    return (
      <p class="muted" data-diff="too-large">
        Too large to diff in the browser ({r.reason}). Ask the node for its diff instead: <code>GET …/configuration/diff?from={from.version}&amp;to={to.version}</code>.
      </p>
    );
  }
  return (
    <>
      <p data-diff-summary>
        <code>{from.version}</code> → <code>{to.version}</code>:{" "}
        <span class="diff-count add" data-added={r.added}>
          +{r.added} added
        </span>
        ,{" "}
        <span class="diff-count del" data-removed={r.removed}>
          −{r.removed} removed
        </span>
        {from.format !== to.format ? (
          <span class="muted">
            {" "}
            (format {from.format} → {to.format})
          </span>
        ) : null}
      </p>
      {r.hunks.length === 0 ? (
        <p class="muted" data-diff="same">
          The two versions have the same text{from.sha256 === to.sha256 ? " (same SHA-256)" : ""}.
        </p>
      ) : (
        <pre class="diff" data-diff={`${from.version}..${to.version}`}>
          <span class="line hunk">--- {from.version}</span>
          <span class="line hunk">+++ {to.version}</span>
          {r.hunks.map((h, i) => (
            <Fragment key={i}>
              <span class="line hunk">{h.header}</span>
              {h.lines.map((l, j) => (
                <span key={j} class={"line " + (l.kind === "+" ? "add" : l.kind === "-" ? "del" : "ctx")} data-line={l.kind === "+" ? "add" : l.kind === "-" ? "del" : "ctx"}>
                  {l.kind + l.text}
                </span>
              ))}
            </Fragment>
          ))}
        </pre>
      )}
    </>
  );
}

const pages: PageDef[] = [
  { path: "/configuration", name: "configuration", title: "Configuration", nav: "Configuration", order: 8, component: Configuration },
  { path: "/configuration/:node_id", name: "node-configuration", title: "Node configuration", component: NodeConfigurationPage },
];
export default pages;
