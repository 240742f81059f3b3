// Rollouts: one configuration applied to many nodes, wave by wave, each
// wave gated on its nodes' health (docs/rollouts.md). The list, and one
// rollout with its waves, each node's phase and operation, and the
// operator's actions: pause, resume, cancel, roll back.

import { useState } from "preact/hooks";
import { ApiError, call, enc, get, type Page, url } from "../api";
import type { PageDef, PageProps } from "../page";
import { href, navigate, setQuery } from "../router";
import type { HubEvent } from "../types";
import {
  ActionNotice,
  Badge,
  Confirm,
  duration,
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
  Time,
  useAction,
  useResource,
  who,
} from "../ui";

export const ROLLOUT_STATES = ["pending", "running", "paused", "succeeded", "failed", "cancelled", "rolled_back"];
export const NODE_PHASES = ["waiting", "applying", "soaking", "passed", "failed", "skipped", "rolling_back", "rolled_back"];
/** Phases after which a node needs nothing more from the rollout. */
const DONE_PHASES = new Set(["passed", "failed", "skipped", "rolled_back"]);
const FINISHED = new Set(["succeeded", "failed", "cancelled", "rolled_back"]);

interface Failure {
  class?: string;
  code?: string;
  message?: string;
}

export interface RolloutNode {
  node_id: string;
  wave: number;
  phase: string;
  version_before?: string;
  node_version_before?: string;
  version_target?: string;
  convergence?: string;
  operation_id?: string;
  failure?: Failure;
  updated_at?: string;
}

/** Preflight is one node's validation of the configuration before any node changes. */
export interface Preflight {
  node_id: string;
  state: string;
  operation_id?: string;
  problems?: { path: string; message: string }[];
  failure?: Failure;
}

export interface Rollout {
  rollout_id: string;
  state: string;
  configuration?: { format: string; content: string };
  config_version?: string;
  source_node_id?: string;
  sha256: string;
  node_ids: string[];
  waves: string[][];
  current_wave: number;
  gate_timeout_ms: number;
  soak_ms: number;
  pause_ms: number;
  max_failures: number;
  failures: number;
  nodes: RolloutNode[];
  preflight?: Preflight[];
  failure?: Failure;
  actor?: string;
  actor_kind?: string;
  correlation_id?: string;
  created_at: string;
  updated_at?: string;
  finished_at?: string;
}

const PAGE_SIZE = 20;

function doneCount(r: Rollout): number {
  return (r.nodes ?? []).filter((n) => DONE_PHASES.has(n.phase)).length;
}

function waveProgress(r: Rollout): string {
  const total = r.waves?.length ?? 0;
  if (r.current_wave <= 0) return `not started (${total} ${total === 1 ? "wave" : "waves"})`;
  return `wave ${r.current_wave} of ${total}`;
}

function whatConfig(r: Rollout) {
  if (r.config_version) {
    return (
      <>
        <code>{r.config_version}</code> of{" "}
        {r.source_node_id ? <a href={href("/configuration/" + enc(r.source_node_id), { to: r.config_version })}>{r.source_node_id}</a> : "?"}
      </>
    );
  }
  return (
    <>
      {r.configuration?.format ?? "new"} text <code title={r.sha256}>{r.sha256?.slice(0, 12)}</code>
    </>
  );
}

// ---------------------------------------------------------------- list

function Rollouts(p: PageProps) {
  const page = pageOf(p.query);
  const state = p.query.get("state") ?? "";
  const list = useResource(
    (s) => get<Page<Rollout>>("/rollouts", { page, page_size: PAGE_SIZE, state }, s),
    `rollouts|${page}|${state}`,
    (ev) => ev.kind === "rollout_changed",
  );
  return (
    <>
      <PageHeader title="Rollouts" sub="One configuration to many nodes, a wave at a time, each wave behind a health gate. Live." />
      <NewRollout />
      <Filters>
        <SelectFilter name="state" label="State" value={state} options={ROLLOUT_STATES} />
      </Filters>
      <Loaded
        res={list}
        empty={(d) =>
          d.items.length === 0 ? (
            state ? (
              <>
                No rollout is {state.replace(/_/g, " ")}. <a href={href("/rollouts")}>All rollouts</a>
              </>
            ) : (
              <NoRollouts />
            )
          ) : null
        }
      >
        {(d) => (
          <>
            <Table
              name="rollouts"
              rows={d.items}
              rowKey={(r) => r.rollout_id}
              columns={[
                { key: "id", label: "Rollout", render: (r) => <a href={href("/rollouts/" + enc(r.rollout_id))} class="mono">{r.rollout_id}</a> },
                { key: "state", label: "State", render: (r) => <Badge value={r.state} title={r.failure?.message} /> },
                { key: "config", label: "Configuration", render: (r) => whatConfig(r) },
                { key: "waves", label: "Progress", render: (r) => waveProgress(r) },
                {
                  key: "nodes",
                  label: "Nodes done",
                  class: "num",
                  render: (r) => (
                    <>
                      {num(doneCount(r))}/{num(r.node_ids?.length ?? r.nodes?.length ?? 0)}
                      {r.failures ? <span class="muted"> ({r.failures} failed)</span> : null}
                    </>
                  ),
                },
                { key: "created", label: "Created", render: (r) => <Time at={r.created_at} /> },
                { key: "actor", label: "Actor", render: (r) => who(r) },
              ]}
            />
            <Pager page={d.page} pageSize={d.page_size} total={d.total} />
          </>
        )}
      </Loaded>
    </>
  );
}

function NoRollouts() {
  return (
    <div class="rollout-empty">
      <p>No rollout yet. A rollout applies one configuration to many nodes, a wave at a time; create one with the operator API (see docs/rollouts.md):</p>
      <pre>{`curl -s -X POST "$HUB/api/v1/rollouts" -H "Authorization: Bearer $SVC_OPERATOR_TOKEN" \\
  -H 'Content-Type: application/json' -d "$(jq -n --rawfile c fleet.yaml '{
    configuration: {format: "yaml", content: $c},
    node_ids: ["node-a", "node-b", "node-c"],
    wave_percentages: [20, 60, 100],
    gate_timeout_ms: 120000, soak_ms: 30000, pause_ms: 60000, max_failures: 0}')"`}</pre>
      <p>
        To change a single node, use its page under <a href={href("/configuration")}>Configuration</a>.
      </p>
    </div>
  );
}

// ---------------------------------------------------------------- new rollout

interface FieldError {
  path: string;
  message: string;
}

/** NewRollout is the body of POST /rollouts as a form; a 422 lists each bad field by its path. */
function NewRollout() {
  const [open, setOpen] = useState(false);
  const [format, setFormat] = useState("yaml");
  const [content, setContent] = useState("");
  const [nodes, setNodes] = useState("");
  const [mode, setMode] = useState<"batch" | "percent">("percent");
  const [batch, setBatch] = useState("1");
  const [percent, setPercent] = useState("20, 60, 100");
  const [gate, setGate] = useState("120000");
  const [soak, setSoak] = useState("0");
  const [pause, setPause] = useState("0");
  const [budget, setBudget] = useState("0");
  const [errors, setErrors] = useState<FieldError[]>([]);
  const action = useAction();
  const int = (v: string) => (v.trim() === "" ? undefined : Number(v));
  const body = () => ({
    configuration: { format, content },
    node_ids: nodes.split(/[\s,]+/).filter(Boolean),
    ...(mode === "batch" ? { batch_size: int(batch) } : { wave_percentages: percent.split(/[\s,]+/).filter(Boolean).map(Number) }),
    gate_timeout_ms: int(gate),
    soak_ms: int(soak),
    pause_ms: int(pause),
    max_failures: int(budget),
  });
  const submit = () =>
    action.run(async () => {
      setErrors([]);
      try {
        const r = await call<Rollout>(url("/rollouts"), { method: "POST", body: body() });
        setOpen(false);
        navigate("/rollouts/" + enc(r.body.rollout_id));
        return (
          <>
            Rollout <a href={href("/rollouts/" + enc(r.body.rollout_id))}>{r.body.rollout_id}</a> created ({r.body.waves.length} waves); it starts within a second.
          </>
        );
      } catch (e) {
        if (e instanceof ApiError && e.status === 422) {
          // The fields are listed under the form, each by its path; the notice keeps the summary.
          setErrors((e.problem.details?.errors as FieldError[] | undefined) ?? []);
          throw new ApiError(e.status, { ...e.problem, details: undefined });
        }
        throw e;
      }
    });
  if (!open) {
    return (
      <div class="actions new-rollout-open">
        <button type="button" class="primary" onClick={() => setOpen(true)}>
          New rollout
        </button>
        <ActionNotice action={action} reload={() => {}} />
      </div>
    );
  }
  const field = (label: string, value: string, set: (v: string) => void, name: string, hint?: string) => (
    <label>
      {label}
      <input name={name} inputMode="numeric" value={value} onInput={(e) => set(e.currentTarget.value)} />
      {hint ? <small class="muted">{hint}</small> : null}
    </label>
  );
  return (
    <Section title="New rollout" actions={<button type="button" class="ghost" onClick={() => setOpen(false)}>Close</button>}>
      <form class="new-rollout" data-form="new-rollout" onSubmit={(e) => e.preventDefault()}>
        <p class="muted">
          One configuration for every target node (no <code>health_check</code>: it is node-local). <code>{"${secret:NAME}"}</code> references are resolved by the Hub from its{" "}
          <code>SVC_SECRET_NAME</code>.
        </p>
        <div class="row">
          <label>
            Format
            <select name="format" value={format} onChange={(e) => setFormat(e.currentTarget.value)}>
              <option value="yaml">yaml</option>
              <option value="json">json</option>
              <option value="toml">toml</option>
            </select>
          </label>
          <label class="grow">
            Nodes (in wave order, comma or space separated)
            <input name="node_ids" value={nodes} placeholder="node-a, node-b, node-c" onInput={(e) => setNodes(e.currentTarget.value)} />
          </label>
        </div>
        <label>
          Configuration
          <textarea name="content" value={content} spellcheck={false} placeholder={"streams:\n  - id: orders\n    input: {type: generate, ...}"} onInput={(e) => setContent(e.currentTarget.value)} />
        </label>
        <div class="row">
          <label>
            Waves by
            <select name="wave_mode" value={mode} onChange={(e) => setMode(e.currentTarget.value as "batch" | "percent")}>
              <option value="percent">cumulative percentages</option>
              <option value="batch">batch size</option>
            </select>
          </label>
          {mode === "batch"
            ? field("Batch size", batch, setBatch, "batch_size", "nodes per wave")
            : field("Wave percentages", percent, setPercent, "wave_percentages", "increasing, the last 100")}
          {field("Gate timeout (ms)", gate, setGate, "gate_timeout_ms", "1000..86400000")}
          {field("Soak (ms)", soak, setSoak, "soak_ms")}
          {field("Pause between waves (ms)", pause, setPause, "pause_ms")}
          {field("Failure budget", budget, setBudget, "max_failures", "nodes that may fail")}
        </div>
        {errors.length ? (
          <ul class="field-errors" data-errors>
            {errors.map((e, i) => (
              <li key={i} data-path={e.path}>
                <code>{e.path || "(body)"}</code>: {e.message}
              </li>
            ))}
          </ul>
        ) : null}
        <ActionNotice action={action} reload={() => {}} />
        <div class="actions">
          <Confirm label="Start rollout" title="Start this rollout?" disabled={action.busy || !content.trim() || !nodes.trim()} onConfirm={() => void submit()}>
            <p>
              The Hub applies this configuration to {nodes.split(/[\s,]+/).filter(Boolean).length} node(s), wave by wave, each wave gated on its nodes' health. You can pause, cancel or
              roll it back.
            </p>
          </Confirm>
        </div>
      </form>
    </Section>
  );
}

// ---------------------------------------------------------------- one rollout

function touched(r: Rollout): boolean {
  return (r.nodes ?? []).some((n) => n.phase !== "waiting" && n.phase !== "skipped");
}

function RolloutPage(p: PageProps) {
  const id = p.params.id;
  const nodeSet = new Set<string>();
  const res = useResource(
    (s) => get<Rollout>("/rollouts/" + enc(id), undefined, s),
    "rollout|" + id,
    (ev: HubEvent) => {
      if (ev.kind === "rollout_changed") return ev.resource_id === id;
      if (ev.kind === "configuration_applied" || ev.kind.startsWith("command_") || ev.kind === "convergence_changed") {
        return !!ev.node_id && nodeSet.has(ev.node_id) && (!ev.resource_id || ev.resource_id === "configuration");
      }
      return false;
    },
  );
  for (const n of res.data?.nodes ?? []) nodeSet.add(n.node_id);
  const action = useAction();
  const act = (a: "pause" | "resume" | "cancel" | "rollback") =>
    action.run(async () => {
      const r = await call<Rollout>(url("/rollouts/" + enc(id) + "/actions"), { method: "POST", body: { action: a } });
      res.reload();
      return (
        <>
          {a === "rollback" ? "Rollback" : a[0].toUpperCase() + a.slice(1)} accepted: the rollout is now <Badge value={r.body.state} />.
        </>
      );
    });
  return (
    <>
      <PageHeader
        title={
          <>
            Rollout <span class="mono">{id}</span>
          </>
        }
        sub={<a href={href("/rollouts")}>All rollouts</a>}
      >
        {res.data ? <RolloutActions r={res.data} busy={action.busy} act={act} /> : null}
      </PageHeader>
      <ActionNotice action={action} reload={res.reload} />
      <Loaded res={res}>
        {(r) => (
          <>
            {r.failure ? (
              <div class="notice error" role="alert" data-rollout-failure={r.failure.code}>
                <span>
                  Failed: {r.failure.message ?? r.failure.code} {r.failure.code ? <code>({r.failure.code})</code> : null}
                </span>
              </div>
            ) : null}
            <Section title="Plan">
              <KV
                rows={[
                  ["state", <Badge value={r.state} />],
                  ["progress", waveProgress(r)],
                  ["nodes done", `${num(doneCount(r))} of ${num(r.nodes?.length ?? 0)}`],
                  ["configuration", whatConfig(r)],
                  ["sha256", <code title={r.sha256}>{r.sha256?.slice(0, 16)}</code>],
                  ["waves", `${r.waves?.length ?? 0} (${(r.waves ?? []).map((w) => w.length).join(" + ")} nodes)`],
                  ["gate timeout", duration(r.gate_timeout_ms)],
                  ["soak", r.soak_ms ? duration(r.soak_ms) : "none"],
                  ["pause between waves", r.pause_ms ? duration(r.pause_ms) : "none"],
                  ["failure budget", `${r.failures} failed of ${r.max_failures} allowed`],
                  ["actor", who(r)],
                  ["correlation id", r.correlation_id ? <a href={href("/operations", { correlation_id: r.correlation_id })}>{r.correlation_id}</a> : ""],
                  ["created", <Time at={r.created_at} />],
                  ["updated", <Time at={r.updated_at} />],
                  ["finished", r.finished_at ? <Time at={r.finished_at} /> : ""],
                ]}
              />
              {r.configuration?.content ? (
                <details class="config-content">
                  <summary>Configuration ({r.configuration.format}, literal credentials masked)</summary>
                  <pre>{r.configuration.content}</pre>
                </details>
              ) : null}
            </Section>
            {r.preflight?.length ? (
              <Section title="Preflight">
                <PreflightView r={r} />
              </Section>
            ) : null}
            <Section title="Waves">
              <Waves r={r} />
            </Section>
            <Section title="Nodes">
              <NodesTable r={r} query={p.query} />
            </Section>
          </>
        )}
      </Loaded>
    </>
  );
}

function RolloutActions(props: { r: Rollout; busy: boolean; act: (a: "pause" | "resume" | "cancel" | "rollback") => void }) {
  const { r, busy, act } = props;
  const st = r.state;
  const canRollback = st !== "rolled_back" && touched(r);
  return (
    <>
      {st === "pending" || st === "running" ? (
        <Confirm label="Pause" title="Pause this rollout?" disabled={busy} onConfirm={() => act("pause")}>
          <p>No further wave starts and no waiting node gets its apply. Nodes already applying still go through their gate.</p>
        </Confirm>
      ) : null}
      {st === "paused" ? (
        <Confirm label="Resume" title="Resume this rollout?" disabled={busy} onConfirm={() => act("resume")}>
          <p>Waves go out again, starting where the rollout stopped.</p>
        </Confirm>
      ) : null}
      {st === "pending" || st === "running" || st === "paused" ? (
        <Confirm label="Cancel rollout" title="Cancel this rollout?" danger disabled={busy} onConfirm={() => act("cancel")} confirmLabel="Cancel rollout">
          <p>Nothing more is dispatched; nodes not yet touched are skipped. Nodes already changed keep the new configuration: roll back to undo that.</p>
        </Confirm>
      ) : null}
      {canRollback ? (
        <Confirm label="Roll back" title="Roll back this rollout?" danger disabled={busy} onConfirm={() => act("rollback")} confirmLabel="Roll back">
          <p>
            Every node this rollout touched gets the configuration it ran before. Nodes never touched are left alone; nothing is deleted.
            {FINISHED.has(st) ? "" : " The rollout stops."}
          </p>
        </Confirm>
      ) : null}
    </>
  );
}

/**
 * PreflightView lists each node's validation of the configuration: the
 * nodes that refused it first, each with its problems by path.
 */
function PreflightView(props: { r: Rollout }) {
  const rank = (p: Preflight) => (p.state === "invalid" ? 0 : p.state === "failed" ? 1 : p.state === "pending" ? 2 : 3);
  const rows = [...(props.r.preflight ?? [])].sort((a, b) => rank(a) - rank(b) || a.node_id.localeCompare(b.node_id));
  const valid = rows.filter((p) => p.state === "valid").length;
  return (
    <>
      <p class="muted">
        Every target node validates the configuration (read-only) before any node changes: {num(valid)} of {num(rows.length)} valid.
      </p>
      <ul class="plain preflight" data-list="preflight">
        {rows.slice(0, 100).map((p) => (
          <li key={p.node_id} data-preflight={p.node_id} data-state={p.state}>
            <a href={href("/nodes/" + enc(p.node_id))}>{p.node_id}</a> <Badge value={p.state} />{" "}
            {p.operation_id ? (
              <a class="muted" href={href("/operations/" + p.operation_id)}>
                operation
              </a>
            ) : null}
            {p.problems?.length ? (
              <ul class="problems">
                {p.problems.map((pr, i) => (
                  <li key={i}>
                    {pr.path ? <code>{pr.path}</code> : null}
                    {pr.path ? ": " : ""}
                    {pr.message}
                  </li>
                ))}
              </ul>
            ) : null}
            {p.failure ? <span class="error-text"> {p.failure.message ?? p.failure.code}</span> : null}
          </li>
        ))}
      </ul>
    </>
  );
}

const CHIPS_PER_WAVE = 60;

function Waves(props: { r: Rollout }) {
  const { r } = props;
  const byNode = new Map((r.nodes ?? []).map((n) => [n.node_id, n]));
  return (
    <ol class="waves" aria-label="Waves">
      {(r.waves ?? []).map((ids, i) => {
        const w = i + 1;
        const nodes = ids.map((id) => byNode.get(id) ?? { node_id: id, wave: w, phase: "waiting" });
        const counts = new Map<string, number>();
        for (const n of nodes) counts.set(n.phase, (counts.get(n.phase) ?? 0) + 1);
        const where = w < r.current_wave ? "past" : w === r.current_wave ? (FINISHED.has(r.state) ? "last" : "current") : "next";
        return (
          <li key={w} class="wave" data-wave={w} data-where={where}>
            <div class="wave-head">
              <strong>Wave {w}</strong>
              <span class="muted">
                {where === "current" ? "current · " : ""}
                {nodes.length} {nodes.length === 1 ? "node" : "nodes"}
              </span>
              <div class="stack wave-bar" role="img" aria-label={`Wave ${w}: ` + [...counts].map(([k, v]) => `${v} ${k}`).join(", ")}>
                {NODE_PHASES.filter((ph) => counts.get(ph)).map((ph) => (
                  <span key={ph} class="part" data-value={ph} style={{ flexGrow: counts.get(ph) }} title={`${counts.get(ph)} ${ph}`} />
                ))}
              </div>
            </div>
            <ul class="wave-nodes">
              {nodes.slice(0, CHIPS_PER_WAVE).map((n) => (
                <li key={n.node_id} class="wave-node" data-node={n.node_id}>
                  <a href={href("/nodes/" + enc(n.node_id))}>{n.node_id}</a> <Badge value={n.phase} title={n.failure ? `${n.failure.code ?? ""} ${n.failure.message ?? ""}` : undefined} />
                  {n.operation_id ? (
                    <a class="op" href={href("/operations/" + enc(n.operation_id))} title={"operation " + n.operation_id}>
                      op
                    </a>
                  ) : null}
                </li>
              ))}
              {nodes.length > CHIPS_PER_WAVE ? (
                <li class="muted">
                  and {num(nodes.length - CHIPS_PER_WAVE)} more: <a href={href("/rollouts/" + enc(r.rollout_id), { wave: w })}>list this wave</a>
                </li>
              ) : null}
            </ul>
          </li>
        );
      })}
    </ol>
  );
}

const NODES_PAGE = 50;

/** NodesTable pages the rollout's nodes here: the record holds them all (up to 10,000). */
function NodesTable(props: { r: Rollout; query: URLSearchParams }) {
  const phase = props.query.get("phase") ?? "";
  const wave = Number(props.query.get("wave") ?? "") || 0;
  const all = (props.r.nodes ?? []).filter((n) => (!phase || n.phase === phase) && (!wave || n.wave === wave));
  const pages = Math.max(1, Math.ceil(all.length / NODES_PAGE));
  const page = Math.min(pageOf(props.query), pages);
  const rows = all.slice((page - 1) * NODES_PAGE, page * NODES_PAGE);
  return (
    <>
      <Filters>
        <SelectFilter name="phase" label="Phase" value={phase} options={NODE_PHASES} />
        <label>
          Wave
          <select name="wave" value={wave ? String(wave) : ""} onChange={(e) => setQuery({ wave: (e.currentTarget as HTMLSelectElement).value })}>
            <option value="">any</option>
            {(props.r.waves ?? []).map((_, i) => (
              <option key={i} value={String(i + 1)}>
                {i + 1}
              </option>
            ))}
          </select>
        </label>
      </Filters>
      {rows.length === 0 ? (
        <p class="muted" data-state="empty">
          No node of this rollout matches.
        </p>
      ) : (
        <Table
          name="rollout-nodes"
          rows={rows}
          rowKey={(n) => n.node_id}
          columns={[
            { key: "node", label: "Node", render: (n) => <a href={href("/nodes/" + enc(n.node_id))}>{n.node_id}</a> },
            { key: "wave", label: "Wave", class: "num", render: (n) => String(n.wave) },
            { key: "phase", label: "Phase", render: (n) => <Badge value={n.phase} /> },
            { key: "convergence", label: "Convergence", render: (n) => (n.convergence ? <Badge value={n.convergence} /> : <span class="muted">—</span>) },
            {
              key: "versions",
              label: "Before → target",
              render: (n) => {
                // version_before is a Hub version, or the node's own id labelled "node:" (a diff takes Hub versions only).
                const hubBefore = n.version_before && !n.version_before.startsWith("node:") ? n.version_before : "";
                const own = n.node_version_before ?? n.version_before?.replace(/^node:/, "");
                const before = hubBefore || (own ? `node's ${own}` : "");
                if (!n.version_target) return <span class="muted">{before || "—"}</span>;
                return (
                  <a
                    data-versions={n.node_id}
                    href={href("/configuration/" + enc(n.node_id), hubBefore ? { from: hubBefore, to: n.version_target } : { to: n.version_target })}
                  >
                    {before || "—"} → <span data-version-target>{n.version_target}</span>
                  </a>
                );
              },
            },
            { key: "operation", label: "Operation", render: (n) => (n.operation_id ? <a href={href("/operations/" + enc(n.operation_id))}>{n.operation_id}</a> : <span class="muted">—</span>) },
            { key: "failure", label: "Failure", render: (n) => (n.failure ? <span title={n.failure.message}>{n.failure.code ?? n.failure.message}</span> : "") },
            { key: "updated", label: "Updated", render: (n) => <Time at={n.updated_at} /> },
          ]}
        />
      )}
      <Pager page={page} pageSize={NODES_PAGE} total={all.length} />
    </>
  );
}

const pages: PageDef[] = [
  { path: "/rollouts", name: "rollouts", title: "Rollouts", nav: "Rollouts", order: 7, component: Rollouts },
  { path: "/rollouts/:id", name: "rollout", title: "Rollout", component: RolloutPage },
];
export default pages;
