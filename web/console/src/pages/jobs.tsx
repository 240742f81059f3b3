// Jobs: the list of the Hub's jobs (desired, observed, convergence, with
// server-side filters and paging) and one job's detail: desired against
// observed, the dataflow drawn from its plan, where its tasks run, its
// gauges, checkpoints and savepoints, versions, and the actions an
// operator takes on it (start, stop, stop with savepoint, restart,
// checkpoint and savepoint now). docs/jobs.md and docs/hub-api.md "Jobs".

import type { ComponentChildren } from "preact";
import { ApiError, call, enc, get, url, type Page } from "../api";
import { Dag, edgeLabel, type Plan } from "../dag";
import { useHistory } from "../metrics";
import type { PageDef, PageProps } from "../page";
import { href, setQuery } from "../router";
import { LiveTail } from "../tail";
import type { Convergence, HubEvent, Operation } from "../types";
import { CONVERGENCES } from "../types";
import {
  ActionNotice,
  Badge,
  Confirm,
  duration,
  Empty,
  ErrorState,
  Filters,
  instant,
  KV,
  LineChart,
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
  type Series,
} from "../ui";

// ---------------------------------------------------------------- records

interface JobView {
  id: string;
  node_id: string;
  version: number;
  placement: {
    node_id: string;
    mode?: string;
    nodes?: string[];
    task_nodes?: Record<string, string>;
    strategy?: string;
    requested_node_ids?: string[];
  };
  desired: {
    state: string;
    generation: number;
    version: number;
    action_id?: string;
    restore?: { recovery: string; artifact?: { kind: string; id: number } };
  };
  observed?: {
    state: string;
    generation: number;
    version: number;
    action_id?: string;
    last_error?: string;
    last_error_at?: string;
    watermark_lag_ms?: number;
    checkpoint_duration_ms?: number;
    checkpoint_failures?: number;
    last_checkpoint?: number;
    state_bytes?: number;
    restarts?: number;
    restored_from?: string;
    reported_at?: string;
    stale?: boolean;
  };
  convergence: Convergence;
  convergence_reason?: string;
  convergence_node?: string;
  latest_operation?: Operation;
  created_at: string;
  updated_at: string;
}

interface TaskAssignment {
  task_id: string;
  node_id: string;
  operators: string[];
  subtask: number;
  key_groups?: [number, number];
  observed: boolean;
  state: string;
  watermark?: number;
  records_in?: number;
  records_out?: number;
}

interface JobDetail extends JobView {
  assignment: TaskAssignment[];
  tasks_observed: number;
  tasks_total: number;
  watermark_lag_ms: number | null;
  checkpoint_duration_ms: number | null;
  checkpoint_failures: number | null;
}

interface Artifact {
  job_id: string;
  kind: string;
  id?: number;
  job_version: number;
  format_version: number;
  max_parallelism: number;
  stateful_operators: string[];
  location?: string;
  bytes: number;
  state: string;
  trigger?: string;
  node_id?: string;
  operation_id?: string;
  failure?: { class?: string; code?: string; message?: string };
  created_at: string;
  completed_at?: string;
}

interface JobVersion {
  version: number;
  current: boolean;
  upgrade_id?: string;
  created_at: string;
  spec: { operators?: { id: string; kind: string }[] } & Record<string, unknown>;
}

interface WriteReply {
  operation_id: string;
  node_id?: string;
  generation?: number;
  desired_state?: string;
  version?: number;
  convergence?: string;
  operation?: string;
  kind?: string;
  state?: string;
  warnings?: { code?: string; message: string }[];
}

const DESIRED_STATES = ["running", "stopped"];
const PAGE_SIZE = 50;

// A job's events: its observed state, convergence, the intents and
// commands written for it, and its artifacts.
function jobEvent(ev: HubEvent): boolean {
  if (ev.kind === "convergence_changed") return ev.data?.resource_type === undefined || ev.data.resource_type === "job";
  return (
    ev.kind === "job_state_changed" ||
    ev.kind === "intent_accepted" ||
    ev.kind.startsWith("command_") ||
    ev.kind === "checkpoint_completed" ||
    ev.kind === "savepoint_completed"
  );
}

function placementText(j: JobView): ComponentChildren {
  const p = j.placement;
  const nodes = p.nodes?.length ? p.nodes : [p.node_id || j.node_id];
  return (
    <span data-placement={p.mode ?? "colocated"}>
      <span class="muted">{p.mode ?? "colocated"}</span>{" "}
      {nodes.map((n, i) => (
        <span key={n}>
          {i ? ", " : ""}
          <a href={href("/nodes/" + enc(n))}>{n}</a>
        </span>
      ))}
    </span>
  );
}

// ---------------------------------------------------------------- list

function Jobs(props: PageProps) {
  const q = props.query;
  const page = pageOf(q);
  const f = { node_id: q.get("node_id") ?? "", convergence: q.get("convergence") ?? "", desired_state: q.get("desired_state") ?? "" };
  const filtered = !!(f.node_id || f.convergence || f.desired_state);
  const jobs = useResource(
    (s) => get<Page<JobView>>("/jobs", { page, page_size: PAGE_SIZE, ...f }, s),
    `jobs:${page}:${f.node_id}:${f.convergence}:${f.desired_state}`,
    jobEvent,
  );
  return (
    <>
      <PageHeader title="Jobs" sub="Streaming dataflows the Hub keeps as desired state and runs on its nodes. Live." />
      <Filters>
        <TextFilter name="node_id" label="Node" value={f.node_id} placeholder="node id" />
        <SelectFilter name="convergence" label="Convergence" value={f.convergence} options={CONVERGENCES} />
        <SelectFilter name="desired_state" label="Desired state" value={f.desired_state} options={DESIRED_STATES} />
      </Filters>
      <Loaded
        res={jobs}
        empty={(p) =>
          p.total === 0 ? (
            filtered ? (
              <>
                No job matches these filters.{" "}
                <a href={href("/jobs")} onClick={() => setQuery({ node_id: "", convergence: "", desired_state: "" })}>
                  Clear the filters.
                </a>
              </>
            ) : (
              <HowToCreate />
            )
          ) : null
        }
      >
        {(p) => (
          <>
            <Table
              name="jobs"
              caption="Jobs"
              rows={p.items}
              rowKey={(j) => j.id}
              columns={[
                { key: "id", label: "Job", render: (j) => <a href={href("/jobs/" + enc(j.id))}>{j.id}</a> },
                { key: "version", label: "Version", class: "num", render: (j) => j.version },
                { key: "placement", label: "Placement", render: placementText },
                { key: "desired", label: "Desired", render: (j) => <Badge value={j.desired.state} /> },
                {
                  key: "observed",
                  label: "Observed",
                  render: (j) =>
                    j.observed?.state ? (
                      <>
                        <Badge value={j.observed.state} />
                        {j.observed.stale ? <span class="muted"> (stale)</span> : null}
                      </>
                    ) : (
                      <span class="muted">not observed</span>
                    ),
                },
                {
                  key: "convergence",
                  label: "Convergence",
                  render: (j) => (
                    <>
                      <Badge value={j.convergence} />
                      {j.convergence_reason ? <span class="muted reason"> {j.convergence_reason.replace(/_/g, " ")}</span> : null}
                    </>
                  ),
                },
                { key: "updated", label: "Updated", render: (j) => <Time at={j.updated_at} /> },
              ]}
            />
            <Pager page={p.page} pageSize={p.page_size} total={p.total} />
          </>
        )}
      </Loaded>
    </>
  );
}

function HowToCreate() {
  const base = location.origin + url("/jobs");
  return (
    <div class="how-to" data-state="no-jobs">
      <p>
        <strong>No job yet.</strong> Submit one to the Hub with <code>POST {url("/jobs")}</code>: the body is{" "}
        <code>{'{"spec": <job>, "desired_state": "stopped"|"running"}'}</code>, where the spec is one entry of a node configuration's{" "}
        <code>jobs:</code> list as JSON (docs/jobs.md, "Jobs on the Hub"). Without <code>node_ids</code> the Hub places it on the least-loaded node
        advertising <code>job_control</code> and its components.
      </p>
      <pre>{`curl -s -H "Authorization: Bearer $SVC_OPERATOR_TOKEN" -H 'Content-Type: application/json' \\
  -d "{\\"spec\\": $(cat spec.json), \\"desired_state\\": \\"stopped\\"}" ${base}`}</pre>
      <p class="muted">
        Check it first against the nodes that may run it with <code>POST {url("/jobs/validate")}</code> (<code>{'{spec, node_ids}'}</code>).
      </p>
    </div>
  );
}

// ---------------------------------------------------------------- detail

function JobPage(props: PageProps) {
  const id = props.params.id;
  const q = props.query;
  const mine = (ev: HubEvent) => ev.resource_id === id;
  const detail = useResource(
    async (s) => {
      const r = await call<JobDetail>(url(`/jobs/${enc(id)}/detail`), { signal: s });
      remember(r.body);
      return { job: r.body, etag: r.etag ?? undefined };
    },
    "job:" + id,
    mine,
  );
  const version = detail.data?.job.version;
  const plan = useResource((s) => get<Plan>(`/jobs/${enc(id)}/plan`, undefined, s), `plan:${id}:${version ?? ""}`);
  const cpPage = pageOf(new URLSearchParams({ page: q.get("cp_page") ?? "1" }));
  const spPage = pageOf(new URLSearchParams({ page: q.get("sp_page") ?? "1" }));
  const verPage = pageOf(new URLSearchParams({ page: q.get("ver_page") ?? "1" }));
  const artifactEvent = (ev: HubEvent) => mine(ev) && (ev.kind.endsWith("_completed") || ev.kind.startsWith("command_") || ev.kind === "intent_accepted");
  const checkpoints = useResource(
    (s) => get<Page<Artifact>>(`/jobs/${enc(id)}/checkpoints`, { page: cpPage, page_size: 20 }, s),
    `cp:${id}:${cpPage}`,
    artifactEvent,
  );
  const savepoints = useResource(
    (s) => get<Page<Artifact>>(`/jobs/${enc(id)}/savepoints`, { page: spPage, page_size: 20 }, s),
    `sp:${id}:${spPage}`,
    artifactEvent,
  );
  const versions = useResource(
    (s) => get<Page<JobVersion>>(`/jobs/${enc(id)}/versions`, { page: verPage, page_size: 10 }, s),
    `ver:${id}:${verPage}`,
    (ev) => mine(ev) && ev.kind === "intent_accepted",
  );
  const rates = useHistory(`/jobs/${enc(id)}/history`, { records_in: "records in", records_out: "records out" });
  const kinds: Record<string, string> = {};
  const cur = versions.data?.items.find((v) => v.version === version);
  for (const o of cur?.spec.operators ?? []) kinds[o.id] = o.kind;

  const header = (
    <PageHeader
      title={
        <>
          Job <code>{id}</code>
        </>
      }
      sub={<a href={href("/jobs")}>‹ All jobs</a>}
    />
  );
  // An unknown job: its error once, not once per section.
  if (detail.data === undefined && detail.error instanceof ApiError && detail.error.status === 404) {
    return (
      <>
        {header}
        <ErrorState error={detail.error} />
      </>
    );
  }
  return (
    <>
      {header}
      <Loaded res={detail}>
        {({ job, etag }) => (
          <>
            <Actions job={job} etag={etag} reload={detail.reload} />
            <DesiredObserved job={job} />
            <Gauges job={job} />
          </>
        )}
      </Loaded>
      <Section title="Throughput">
        <LineChart label={`Records per second, job ${id}`} unit="records/s" series={rates.series} windowMs={rates.windowMs} height={140} />
      </Section>
      <Section title="Dataflow">
        <Loaded res={plan}>{(p) => <PlanView plan={p} kinds={kinds} />}</Loaded>
      </Section>
      {detail.data ? <Placement job={detail.data.job} page={pageOf(new URLSearchParams({ page: q.get("task_page") ?? "1" }))} /> : null}
      {detail.data ? <JobTail job={detail.data.job} /> : null}
      <Section title="Checkpoints">
        <Loaded res={checkpoints}>
          {(cp) => (
            <>
              <DurationChart checkpoints={cp.items} savepoints={savepoints.data?.items ?? []} />
              <Artifacts name="checkpoints" page={cp} param="cp_page" empty="No checkpoint recorded yet: they appear as the job's node takes them (every checkpoint.interval_ms) or on Checkpoint now." />
            </>
          )}
        </Loaded>
      </Section>
      <Section title="Savepoints">
        <Loaded res={savepoints}>
          {(sp) => <Artifacts name="savepoints" page={sp} param="sp_page" empty="No savepoint yet: take one with Savepoint now, or Stop with savepoint." />}
        </Loaded>
      </Section>
      <Section title="Versions">
        <Loaded res={versions} empty={(p) => (p.total === 0 ? "No version recorded." : null)}>
          {(p) => <Versions page={p} />}
        </Loaded>
      </Section>
    </>
  );
}

// ---------------------------------------------------------------- actions

function Actions(props: { job: JobDetail; etag?: string; reload: () => void }) {
  const { job, etag, reload } = props;
  const action = useAction();
  const base = `/jobs/${enc(job.id)}`;
  const produced = (r: WriteReply, what: string): ComponentChildren => (
    <span data-result="operation">
      {what}: operation{" "}
      <a href={href("/operations/" + r.operation_id)} data-operation-id={r.operation_id}>
        {r.operation_id}
      </a>
      {r.desired_state ? (
        <>
          {" "}
          · desired <strong>{r.desired_state}</strong>
        </>
      ) : null}
      {r.generation ? <> · generation {r.generation}</> : null}
      {r.node_id ? <> · node {r.node_id}</> : null}
      {r.kind && r.state ? (
        <>
          {" "}
          · {r.kind} {r.state}
        </>
      ) : null}
      {r.warnings?.length ? <> · {r.warnings.map((w) => w.message).join("; ")}</> : null}
    </span>
  );
  const write = (what: string, path: string, opts: { method: string; body?: unknown; ifMatch?: boolean }) =>
    void action.run(async () => {
      const r = await call<WriteReply>(url(base + path), { method: opts.method, body: opts.body, ifMatch: opts.ifMatch ? etag : undefined });
      reload();
      return produced(r.body, what);
    });
  const running = job.desired.state === "running";
  const cp = job.observed?.state ? ` It is ${job.observed.state} on ${job.node_id}.` : "";
  return (
    <>
      <div class="actions job-actions" data-actions="job">
        <Confirm label="Start" title={`Start job ${job.id}?`} disabled={action.busy || running} onConfirm={() => write("Start", "/desired-state", { method: "PUT", body: { state: "running" }, ifMatch: true })}>
          Sets the desired state to running: the Hub sends <code>job_start</code> to {job.node_id}, which restores from the job's recovery mode (
          {job.desired.restore?.recovery ?? "the spec's"}).
        </Confirm>
        <Confirm label="Stop" title={`Stop job ${job.id}?`} danger disabled={action.busy || !running} onConfirm={() => write("Stop", "/desired-state", { method: "PUT", body: { state: "stopped" }, ifMatch: true })}>
          Sets the desired state to stopped, without a savepoint.{cp} Its output stops until it is started again.
        </Confirm>
        <Confirm
          label="Stop with savepoint"
          title={`Stop job ${job.id} with a savepoint?`}
          danger
          disabled={action.busy || !running}
          onConfirm={() => write("Stop with savepoint", "/desired-state", { method: "PUT", body: { state: "stopped", savepoint: true }, ifMatch: true })}
        >
          Takes a savepoint, then stops the job.{cp} An upgrade in savepoint mode restores exactly this savepoint.
        </Confirm>
        <Confirm label="Restart" title={`Restart job ${job.id}?`} danger disabled={action.busy} onConfirm={() => write("Restart", "/actions/restart", { method: "POST", ifMatch: true })}>
          Stops and starts the job on its node, from its newest checkpoint or savepoint; it converges when the node reports the restart.
        </Confirm>
        <Confirm label="Checkpoint now" title={`Checkpoint job ${job.id} now?`} disabled={action.busy} onConfirm={() => write("Checkpoint now", "/checkpoints", { method: "POST" })}>
          Triggers a barrier checkpoint on {job.node_id}; the record stays pending until the node completes it.
        </Confirm>
        <Confirm label="Savepoint now" title={`Take a savepoint of job ${job.id} now?`} disabled={action.busy} onConfirm={() => write("Savepoint now", "/savepoints", { method: "POST" })}>
          Triggers a savepoint on {job.node_id}; savepoints are never removed by retention.
        </Confirm>
        {action.busy ? <span class="muted" aria-live="polite">Sending…</span> : null}
      </div>
      <ActionNotice action={action} reload={reload} />
    </>
  );
}

// ---------------------------------------------------------------- sections

/** JobTail taps the job on its (first) node, after its first sink. */
function JobTail(props: { job: JobDetail }) {
  const j = props.job;
  const nodes = j.placement.nodes?.length ? j.placement.nodes : [j.placement.node_id || j.node_id];
  const node = nodes[0];
  if (!node) return null;
  return <LiveTail path={"/nodes/" + enc(node) + "/jobs/" + enc(j.id)} what={`job ${j.id} on ${node}, at its first sink`} />;
}

function DesiredObserved(props: { job: JobDetail }) {
  const j = props.job;
  const o = j.observed;
  return (
    <div class="side-by-side job-state" data-convergence={j.convergence}>
      <Section title="Desired">
        <KV
          rows={[
            ["state", <Badge value={j.desired.state} />],
            ["version", j.desired.version],
            ["generation", j.desired.generation],
            ["action id", j.desired.action_id],
            ["restore", j.desired.restore ? j.desired.restore.recovery + (j.desired.restore.artifact ? ` ${j.desired.restore.artifact.kind} ${j.desired.restore.artifact.id}` : "") : undefined],
            ["placement", placementText(j)],
            ["strategy", j.placement.strategy],
          ]}
        />
      </Section>
      <Section title="Observed">
        {o?.state ? (
          <KV
            rows={[
              ["state", <Badge value={o.state} />],
              ["version", o.version],
              ["generation", o.generation],
              ["action id", o.action_id],
              ["restored from", o.restored_from],
              ["last checkpoint", o.last_checkpoint],
              ["state size", o.state_bytes !== undefined ? bytes(o.state_bytes) : undefined],
              ["restarts", o.restarts],
              [
                "last error",
                o.last_error ? (
                  <span class="error-text">
                    {o.last_error} <Time at={o.last_error_at} />
                  </span>
                ) : undefined,
              ],
              [
                "reported",
                <>
                  <Time at={o.reported_at} />
                  {o.stale ? <span class="muted"> (stale)</span> : null}
                </>,
              ],
            ]}
          />
        ) : (
          <p class="muted">Not observed yet: the node has not reported this job.</p>
        )}
      </Section>
      <Section title="Convergence">
        <KV
          rows={[
            ["convergence", <Badge value={j.convergence} />],
            ["reason", j.convergence_reason?.replace(/_/g, " ")],
            ["from node", j.convergence_node],
            [
              "latest operation",
              j.latest_operation ? (
                <>
                  <a href={href("/operations/" + j.latest_operation.operation_id)}>{j.latest_operation.operation}</a> <Badge value={j.latest_operation.state} />
                </>
              ) : undefined,
            ],
            ["failure", j.latest_operation?.failure?.message ?? j.latest_operation?.failure?.code],
            ["updated", <Time at={j.updated_at} />],
            ["created", <Time at={j.created_at} />],
          ]}
        />
      </Section>
    </div>
  );
}

function Gauges(props: { job: JobDetail }) {
  const j = props.job;
  const none = "not observed yet";
  return (
    <div class="tiles job-gauges">
      <Gauge name="watermark_lag_ms" label="Watermark lag" value={j.watermark_lag_ms === null ? null : duration(j.watermark_lag_ms)} hint={j.watermark_lag_ms === null ? none : "processing time − lowest task watermark"} />
      <Gauge
        name="checkpoint_duration_ms"
        label="Last checkpoint"
        value={j.checkpoint_duration_ms === null ? null : duration(j.checkpoint_duration_ms)}
        hint={j.checkpoint_duration_ms === null ? none : "barrier injection to manifest"}
      />
      <Gauge
        name="checkpoint_failures"
        label="Checkpoint failures"
        value={j.checkpoint_failures === null ? null : num(j.checkpoint_failures)}
        hint={j.checkpoint_failures === null ? none : "checkpoints abandoned (failed or timed out)"}
        bad={!!j.checkpoint_failures}
      />
      <section class="tile gauge" data-gauge="tasks_observed">
        <h2>Tasks observed</h2>
        <p class="big">
          {num(j.tasks_observed)} / {num(j.tasks_total)}
        </p>
        <meter min={0} max={Math.max(1, j.tasks_total)} value={j.tasks_observed} low={Math.max(1, j.tasks_total) - 0.5} optimum={j.tasks_total} aria-label="tasks observed" />
      </section>
    </div>
  );
}

function Gauge(props: { name: string; label: string; value: string | null; hint: string; bad?: boolean }) {
  return (
    <section class={"tile gauge" + (props.bad ? " bad" : "")} data-gauge={props.name}>
      <h2>{props.label}</h2>
      <p class="big">{props.value ?? "—"}</p>
      <span class="muted">{props.hint}</span>
    </section>
  );
}

function PlanView(props: { plan: Plan; kinds: Record<string, string> }) {
  const p = props.plan;
  const cp = p.checkpoint;
  const tasks = p.chains.reduce((a, c) => a + c.tasks.length, 0);
  const between = p.edges.filter((e) => !e.chained);
  return (
    <>
      <p class="muted">
        Version {p.version} · {p.chains.length} chains, {tasks} tasks · max parallelism {p.max_parallelism} key groups · state format {p.format_version}
      </p>
      <div class="dag-scroll">
        <Dag plan={p} kinds={props.kinds} />
      </div>
      <div class="grid2 plan-facts">
        <div data-plan="checkpoint">
          <h3>Checkpoint policy</h3>
          {cp ? (
            <KV
              rows={[
                ["interval", cp.interval_ms !== undefined ? duration(cp.interval_ms) : undefined],
                ["retention", cp.retention !== undefined ? `newest ${cp.retention}` : undefined],
                ["object store", cp.object_store_uri ? <code>{cp.object_store_uri}</code> : undefined],
                ["recovery", p.recovery],
                ["state", p.state ? `${String(p.state.backend ?? "")} ${String(p.state.durability ?? "")}`.trim() : undefined],
              ]}
            />
          ) : (
            <p class="muted">No checkpoint configuration: the job keeps no recoverable state (recovery {p.recovery ?? "—"}).</p>
          )}
        </div>
        <div data-plan="edges">
          <h3>Edges between tasks</h3>
          {between.length ? (
            <ul class="plain">
              {between.map((e) => (
                <li key={e.id} data-edge={e.id}>
                  <code>{e.from}</code> → <code>{e.to}</code>: <span class={e.mode === "partitioned" ? "partitioned-text" : ""}>{edgeLabel(e)}</span>
                  {e.routes?.length ? (
                    <span class="muted">
                      {" "}
                      ({e.routes.map((r) => `#${r.subtask}: ${r.key_groups.start}–${r.key_groups.end}`).join(", ")})
                    </span>
                  ) : null}
                </li>
              ))}
            </ul>
          ) : (
            <p class="muted">One task: every operator is chained.</p>
          )}
        </div>
      </div>
    </>
  );
}

const TASK_PAGE = 50;

function Placement(props: { job: JobDetail; page: number }) {
  const a = props.job.assignment ?? [];
  const pages = Math.max(1, Math.ceil(a.length / TASK_PAGE));
  const page = Math.min(props.page, pages);
  const rows = a.slice((page - 1) * TASK_PAGE, page * TASK_PAGE);
  return (
    <Section title={`Task placement (${num(props.job.tasks_observed)} of ${num(props.job.tasks_total)} observed)`}>
      {a.length === 0 ? (
        <Empty>No task in the current version's plan.</Empty>
      ) : (
        <>
          <Table
            name="job-tasks"
            caption="Tasks and their nodes"
            rows={rows}
            rowKey={(t) => t.task_id}
            columns={[
              { key: "task", label: "Task", render: (t) => <code>{t.task_id}</code> },
              { key: "operators", label: "Operators", render: (t) => t.operators.join(" → ") },
              { key: "subtask", label: "Subtask", class: "num", render: (t) => t.subtask },
              { key: "key_groups", label: "Key groups", render: (t) => (t.key_groups ? `${t.key_groups[0]}–${t.key_groups[1]}` : <span class="muted">—</span>) },
              { key: "node", label: "Node", render: (t) => <a href={href("/nodes/" + enc(t.node_id))}>{t.node_id}</a> },
              {
                key: "state",
                label: "Observed",
                render: (t) =>
                  t.observed ? (
                    <Badge value={t.state} />
                  ) : (
                    <span class="not-observed" data-observed="false" title="No observation of the node mentions this task yet">
                      <Badge value="not_observed" />
                    </span>
                  ),
              },
              { key: "records_in", label: "Records in", class: "num", render: (t) => (t.observed ? num(t.records_in ?? 0) : "—") },
              { key: "records_out", label: "Records out", class: "num", render: (t) => (t.observed ? num(t.records_out ?? 0) : "—") },
              {
                key: "watermark",
                label: "Watermark",
                render: (t) => (t.watermark ? <time title={String(t.watermark)}>{instant(t.watermark)}</time> : <span class="muted">—</span>),
              },
            ]}
          />
          {pages > 1 ? <Pager param="task_page" page={page} pageSize={TASK_PAGE} total={a.length} /> : null}
        </>
      )}
    </Section>
  );
}

function Artifacts(props: { name: string; page: Page<Artifact>; param: string; empty: string }) {
  const p = props.page;
  if (p.total === 0) return <Empty>{props.empty}</Empty>;
  return (
    <>
      <Table
        name={props.name}
        caption={props.name}
        rows={p.items}
        rowKey={(a) => (a.id ? String(a.id) : "op-" + (a.operation_id ?? a.created_at))}
        columns={[
          { key: "id", label: "Id", class: "num", render: (a) => (a.id ? a.id : <span class="muted">—</span>) },
          { key: "state", label: "State", render: (a) => <Badge value={a.state} title={a.failure?.message} /> },
          { key: "trigger", label: "Trigger", render: (a) => a.trigger ?? "" },
          { key: "version", label: "Job version", class: "num", render: (a) => a.job_version },
          { key: "bytes", label: "Size", class: "num", render: (a) => (a.state === "completed" ? bytes(a.bytes) : "—") },
          { key: "duration", label: "Duration", class: "num", render: (a) => duration(artifactMs(a)) },
          { key: "completed", label: "Completed", render: (a) => <Time at={a.completed_at ?? null} /> },
          { key: "node", label: "Node", render: (a) => (a.node_id ? <a href={href("/nodes/" + enc(a.node_id))}>{a.node_id}</a> : "") },
          {
            key: "operation",
            label: "Operation",
            render: (a) => (a.operation_id ? <a href={href("/operations/" + a.operation_id)}>{a.operation_id.slice(0, 13)}…</a> : <span class="muted">periodic</span>),
          },
          {
            key: "location",
            label: "Location",
            render: (a) =>
              a.failure ? (
                <span class="error-text">{a.failure.message ?? a.failure.code}</span>
              ) : a.state === "pruned" ? (
                <span class="muted" title={a.location}>
                  deleted by checkpoint.retention
                </span>
              ) : a.location ? (
                <code class="location" title={a.location}>
                  {a.location}
                </code>
              ) : (
                ""
              ),
          },
        ]}
      />
      <Pager param={props.param} page={p.page} pageSize={p.page_size} total={p.total} />
    </>
  );
}

/**
 * Measured holds, per job, the node's own measure of checkpoints seen while
 * this page is open: an observation carries last_checkpoint with its
 * checkpoint_duration_ms (barrier injection to manifest), so the record of
 * that id gets its real duration. A periodic record alone carries one time
 * (the manifest's), so its duration is otherwise unknown.
 */
const measured = new Map<string, Map<number, number>>();

function remember(j: JobDetail) {
  const o = j.observed;
  if (!o?.last_checkpoint || o.checkpoint_duration_ms === undefined) return;
  let m = measured.get(j.id);
  if (!m) measured.set(j.id, (m = new Map()));
  m.set(o.last_checkpoint, o.checkpoint_duration_ms);
  if (m.size > 1000) m.delete(m.keys().next().value!);
}

/** artifactMs is a record's duration: measured by its node, else trigger to completion, else unknown. */
function artifactMs(a: Artifact): number | null {
  if (a.kind === "checkpoint" && a.id) {
    const m = measured.get(a.job_id)?.get(a.id);
    if (m !== undefined) return m;
  }
  if (!a.completed_at) return null;
  const d = Date.parse(a.completed_at) - Date.parse(a.created_at);
  if (Number.isNaN(d) || (d <= 0 && a.trigger === "periodic")) return null;
  return Math.max(0, d);
}

/**
 * DurationChart plots each completed record's duration at its completion
 * time, over a window that covers the records shown.
 */
function DurationChart(props: { checkpoints: Artifact[]; savepoints: Artifact[] }) {
  const pts = (xs: Artifact[]): [number, number][] =>
    xs
      .filter((a) => a.state === "completed" && a.completed_at)
      .map((a): [number, number] => [Date.parse(a.completed_at!), artifactMs(a) ?? NaN])
      .filter((p) => !Number.isNaN(p[0]) && !Number.isNaN(p[1]))
      .sort((a, b) => a[0] - b[0]);
  const series: Series[] = [{ name: "checkpoint duration", points: pts(props.checkpoints) }];
  const sp = pts(props.savepoints);
  if (sp.length) series.push({ name: "savepoint duration", points: sp });
  const all = series.flatMap((s) => s.points.map((p) => p[0]));
  const oldest = all.length ? Math.min(...all) : Date.now();
  const span = Math.max(60_000, (Date.now() - oldest) * 1.05 + 1000);
  return (
    <div class="job-chart">
      <LineChart label="Checkpoint durations by completion time" unit="ms" series={series} windowMs={span} height={140} />
      <p class="muted small">
        A triggered checkpoint or savepoint counts from its trigger to its completion; a periodic one from the node's measure (barrier to manifest), known for
        those completed while this page is open.
      </p>
    </div>
  );
}

function Versions(props: { page: Page<JobVersion> }) {
  const p = props.page;
  return (
    <>
      <ul class="versions plain" data-list="versions">
        {p.items.map((v) => (
          <li key={v.version} data-version={v.version} data-current={v.current ? "true" : undefined}>
            <strong>version {v.version}</strong>
            {v.current ? (
              <>
                {" "}
                <Badge value="current" />
              </>
            ) : null}{" "}
            <span class="muted">
              created <Time at={v.created_at} />
              {v.upgrade_id ? ` · upgrade ${v.upgrade_id}` : ""}
            </span>
            <details>
              <summary>Spec (JSON)</summary>
              <pre>{JSON.stringify(v.spec, null, 2)}</pre>
            </details>
          </li>
        ))}
      </ul>
      {p.total > p.page_size ? <Pager param="ver_page" page={p.page} pageSize={p.page_size} total={p.total} /> : null}
    </>
  );
}

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const u = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < u.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${u[i]}`;
}

const pages: PageDef[] = [
  { path: "/jobs", name: "jobs", title: "Jobs", nav: "Jobs", order: 3, component: Jobs },
  { path: "/jobs/:id", name: "job", title: "Job", component: JobPage },
];
export default pages;
