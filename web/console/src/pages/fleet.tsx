// Fleet overview: nodes by status and mode, streams by convergence,
// operations pending or failed, the Hub's version and uptime, and the
// fleet's throughput.

import type { ComponentChildren } from "preact";
import { get, type Page } from "../api";
import { useHistory } from "../metrics";
import type { PageDef } from "../page";
import { href } from "../router";
import type { Convergence, Operation, Status } from "../types";
import { CONVERGENCES } from "../types";
import { Badge, duration, Empty, LineChart, Loaded, num, PageHeader, Section, Table, Time, useResource } from "../ui";

interface OperationsStatus {
  by_state: Record<string, number>;
  oldest_pending_age_ms: number;
  outbox_depth: number;
  in_flight: number;
  reconciler_lag_ms: number;
}

function Fleet() {
  // GET /status counts every stream of the fleet: re-read it only for the
  // events that can change a count, not for every command's progress.
  const status = useResource(
    (s) => get<Status>("/status", undefined, s),
    "status",
    (ev) => ev.kind === "convergence_changed" || ev.kind === "stream_state_changed" || ev.kind === "intent_accepted" || ev.kind.startsWith("node_"),
  );
  const ops = useResource((s) => get<OperationsStatus>("/operations/status", undefined, s), "ops", (ev) => ev.kind.startsWith("command_") || ev.kind === "intent_accepted" || ev.kind === "operation_cancelled");
  const failed = useResource(
    (s) => get<Page<Operation>>("/operations", { state: "failed", page_size: 5 }, s),
    "failed",
    (ev) => ev.kind === "command_failed" || ev.kind === "command_timed_out",
  );
  const rates = useHistory("/history", { received: "received", sent: "sent", errors: "errors" });
  return (
    <>
      <PageHeader title="Fleet" sub="What the Hub wants, what the nodes report, and whether the two agree. Live." />
      <Loaded res={status}>
        {(st) => (
          <>
            <div class="tiles">
              <Tile label="Nodes" value={st.nodes.total} link={href("/nodes")}>
                <Count label="online" n={st.nodes.online} link={href("/nodes", { status: "online" })} />
                <Count label="unavailable" n={st.nodes.unavailable} link={href("/nodes", { status: "unavailable" })} />
                <Count label="draining" n={st.nodes.draining} link={href("/nodes", { mode: "draining" })} />
                <Count label="maintenance" n={st.nodes.maintenance} link={href("/nodes", { mode: "maintenance" })} />
              </Tile>
              {/* Every stream the convergence bar counts (desired or reported), so the two agree. */}
              <Tile label="Streams" value={sumOf(st.streams.convergence)} link={href("/streams")}>
                <Count label="reported" n={st.streams.total} link={href("/streams")} />
                <Count label="running" n={st.streams.running} link={href("/streams", { state: "running" })} />
                <Count label="failed" n={st.streams.failed} link={href("/streams", { state: "failed" })} />
              </Tile>
              <Tile label="Jobs" value={st.jobs?.total} link={href("/jobs")}>
                <Count label="running" n={st.jobs?.observed.running ?? 0} link={href("/jobs", { desired_state: "running" })} />
                <Count label="desired stopped" n={st.jobs?.desired.stopped ?? 0} link={href("/jobs", { desired_state: "stopped" })} />
                <Count label="failed" n={st.jobs?.observed.failed ?? 0} link={href("/jobs")} />
              </Tile>
              <Tile label="Operations" value={ops.data ? Object.values(ops.data.by_state).reduce((a, b) => a + b, 0) : undefined} link={href("/operations")}>
                <Count label="pending" n={ops.data?.by_state.pending ?? 0} link={href("/operations", { state: "pending" })} />
                <Count label="in flight" n={ops.data?.in_flight ?? 0} link={href("/operations", { state: "dispatched" })} />
                <Count label="failed" n={ops.data?.by_state.failed ?? 0} link={href("/operations", { state: "failed" })} />
                <Count label="timed out" n={ops.data?.by_state.timed_out ?? 0} link={href("/operations", { state: "timed_out" })} />
              </Tile>
              <Tile label="Hub" value={st.version ?? "dev"}>
                <span class="count">
                  up {duration(st.uptime_ms)} · since <Time at={st.started_at} />
                </span>
                <span class="count">
                  storage <Badge value={st.storage} /> · {st.ready ? "ready" : "not ready"}
                </span>
                {ops.data ? <span class="count">reconciler lag {duration(ops.data.reconciler_lag_ms)}</span> : null}
              </Tile>
            </div>
            <Section title="Streams by convergence">
              {st.streams.convergence && Object.values(st.streams.convergence).some((n) => n) ? (
                <ConvergenceBar counts={st.streams.convergence} list="/streams" label="Streams by convergence" />
              ) : (
                <Empty>
                  Nothing is running yet. Start nodes with <code>health_check.hub_urls</code> pointing at this Hub, or set a stream's desired state.
                </Empty>
              )}
            </Section>
            <Section title="Jobs by convergence">
              {st.jobs?.total ? (
                <ConvergenceBar counts={st.jobs.convergence} list="/jobs" label="Jobs by convergence" />
              ) : (
                <Empty>
                  No job yet: submit one with <code>POST /jobs</code> (see the Jobs page).
                </Empty>
              )}
            </Section>
          </>
        )}
      </Loaded>
      <Section title="Throughput">
        <LineChart label="Messages per second, whole fleet" unit="msg/s" series={rates.series} windowMs={rates.windowMs} />
      </Section>
      <Section title="Latest failed operations" actions={<a href={href("/operations", { state: "failed" })}>All failed</a>}>
        <Loaded res={failed} empty={(p) => (p.items.length === 0 ? "No operation has failed." : null)}>
          {(p) => (
            <Table
              name="failed-operations"
              rows={p.items}
              rowKey={(o) => o.operation_id}
              columns={[
                { key: "operation", label: "Operation", render: (o) => <a href={href("/operations/" + o.operation_id)}>{o.operation}</a> },
                { key: "node", label: "Node", render: (o) => o.node_id },
                { key: "resource", label: "Resource", render: (o) => o.resource_id },
                { key: "failure", label: "Failure", render: (o) => o.failure?.message ?? o.failure?.code ?? "" },
                { key: "at", label: "When", render: (o) => <Time at={o.updated_at ?? o.created_at} /> },
              ]}
            />
          )}
        </Loaded>
      </Section>
    </>
  );
}

function Tile(props: { label: string; value: string | number | undefined; link?: string; children?: ComponentChildren }) {
  return (
    <section class="tile" data-tile={props.label}>
      <h2>{props.link ? <a href={props.link}>{props.label}</a> : props.label}</h2>
      <p class="big">{typeof props.value === "number" ? num(props.value) : props.value ?? "—"}</p>
      <div class="counts">{props.children}</div>
    </section>
  );
}

function Count(props: { label: string; n: number; link: string }) {
  return (
    <a class="count" href={props.link} data-count={props.label}>
      <strong>{num(props.n)}</strong> {props.label}
    </a>
  );
}

/** sumOf adds the counts of a convergence map. */
function sumOf(counts: Partial<Record<Convergence, number>> | undefined): number {
  return CONVERGENCES.reduce((a, c) => a + (counts?.[c] ?? 0), 0);
}

/** ConvergenceBar is a stacked bar of counts, each part a link to the list filtered by it. */
function ConvergenceBar(props: { counts: Partial<Record<Convergence, number>>; list: string; label: string }) {
  const total = CONVERGENCES.reduce((a, c) => a + (props.counts[c] ?? 0), 0);
  return (
    <div>
      <div class="stack" role="img" aria-label={props.label} data-bar={props.list}>
        {CONVERGENCES.filter((c) => props.counts[c]).map((c) => (
          <a key={c} class="part" data-value={c} href={href(props.list, { convergence: c })} style={{ flexGrow: props.counts[c] }} title={`${props.counts[c]} ${c}`} />
        ))}
      </div>
      <ul class="legend inline">
        {CONVERGENCES.map((c) => (
          <li key={c}>
            <a href={href(props.list, { convergence: c })} data-convergence-count={c} data-n={props.counts[c] ?? 0}>
              <Badge value={c} /> {num(props.counts[c] ?? 0)}
              {total ? <span class="muted"> ({Math.round(((props.counts[c] ?? 0) * 100) / total)}%)</span> : null}
            </a>
          </li>
        ))}
      </ul>
    </div>
  );
}

const pages: PageDef[] = [{ path: "/fleet", name: "fleet", title: "Fleet", nav: "Fleet", order: 0, component: Fleet }];
export default pages;
